// Measures the shape of src/ from the TypeScript AST: functions over 60 lines, import cycles between
// files and between top-level folders, imports that run against the layering, endpoints declared
// outside src/api/, handlers that read their own input, environment reads outside src/config/, and
// places that list endpoints by hand;
// fails when one rose above scripts/shape-baseline.json.
// Usage: node --import tsx scripts/shape-counts.ts [--list] [--record]
import { readdirSync, readFileSync, existsSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { API } from "typescript/unstable/sync";
import { SyntaxKind, computeLineStarts, type Node, type SourceFile } from "typescript/unstable/ast";
import { isFunctionLikeDeclaration } from "typescript/unstable/ast/is";
import { getTokenPosOfNode } from "typescript/unstable/ast";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "..");
const SRC = join(ROOT, "src");
const MAX_LINES = 60;
const list = process.argv.includes("--list");

/** A function may exceed the limit when one of the two lines above it says why (declarative factories, CLI definitions). */
const EXEMPT_MARK = "long-by-design:";

/**
 * Which top-level folders a folder may import from. Anything not listed is a layering violation.
 * `protocol`, `errors` and `config` are shared vocabulary (protocol/tiers.ts, the service tiers, reaches the
 * catalog's prices and the engine's policy); the engine knows nothing of HTTP, accounts
 * or prices; the HTTP layer knows nothing of llama.cpp.
 */
const MAY_IMPORT: Record<string, string[]> = {
  errors: [],
  config: ["errors"],
  protocol: ["errors"],
  storage: ["errors", "config"],
  billing: ["errors", "protocol", "storage", "catalog", "processes"],
  accounts: ["errors", "protocol", "storage", "billing", "limits", "config"],
  limits: ["errors", "protocol", "storage", "billing", "config"],
  catalog: ["errors", "config", "protocol"],
  engine: ["errors", "config", "protocol", "catalog"],
  observability: ["errors", "protocol", "config", "catalog", "serving", "backends"],
  backends: ["errors", "protocol", "engine", "catalog", "config"],
  // The engine only through backends/, the seam (backend.ts).
  serving: ["errors", "protocol", "billing", "accounts", "limits", "backends", "observability", "storage", "catalog", "config"],
  deployments: ["errors", "protocol", "storage", "billing", "accounts", "catalog", "config", "backends", "limits", "serving"],
  adapters: ["errors", "protocol", "storage", "catalog", "config", "backends", "serving"],
  // One folder per API resource (api/<resource>/) and the registry of every endpoint; no transport. It
  // stands on the services: serving, and the account-scoped keys (accounts/account-keys.ts).
  api: ["errors", "protocol", "storage", "serving", "accounts", "batches", "deployments", "adapters"],
  processes: ["errors", "storage"],
  // The Batch API's service, store and runner, below api/ (api/files/, api/batches/ stand on it): its lines run
  // the api operations handed in at start (batches/line-executor.ts), never through HTTP.
  batches: ["errors", "protocol", "storage", "billing", "serving"],
  // Services are handed in (cli/serve.ts): from accounts/ only the key services' interfaces, never a store.
  http: [
    "errors",
    "protocol",
    "accounts",
    "limits",
    "catalog",
    "config",
    "serving",
    "backends",
    "observability",
    "deployments",
    "adapters",
    "api",
    "processes",
    "batches",
  ],
  cli: ["*"],
  // The HTTP layer's name before it became http/, so the counts can be taken on older commits.
  server: [],
  // Where the Responses API and the stored chat completions lived before api/ (older commits again).
  responses: ["errors", "protocol", "storage", "serving"],
  "chat-store": ["errors", "protocol", "storage", "serving"],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

function functionName(node: Node): string {
  const named = node as Node & { name?: Node & { text?: string } };
  if (named.name?.text) return named.name.text;
  if (node.kind === SyntaxKind.Constructor) return "constructor";
  const parent = node.parent as (Node & { name?: Node & { text?: string } }) | undefined;
  if (parent && (parent.kind === SyntaxKind.VariableDeclaration || parent.kind === SyntaxKind.PropertyAssignment) && parent.name?.text)
    return parent.name.text;
  return "(anonymous)";
}

interface LongFunction {
  file: string;
  name: string;
  line: number;
  lines: number;
  exempt: boolean;
}

function lineOf(lineStarts: readonly number[], position: number): number {
  let low = 0;
  let high = lineStarts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (lineStarts[middle]! <= position) low = middle;
    else high = middle - 1;
  }
  return low;
}

/** Function-like nodes with a body longer than MAX_LINES, with whether the line above gives a reason. */
function longFunctions(file: string, source: SourceFile, text: string): LongFunction[] {
  const found: LongFunction[] = [];
  const lines = text.split("\n");
  const lineStarts = computeLineStarts(text);
  const visit = (node: Node): void => {
    if (isFunctionLikeDeclaration(node) && (node as { body?: Node }).body) {
      const start = lineOf(lineStarts, getTokenPosOfNode(node, source));
      const length = lineOf(lineStarts, node.end) - start + 1;
      if (length > MAX_LINES) {
        const above = [lines[start - 1], lines[start - 2]].join(" ");
        found.push({ file, name: functionName(node), line: start + 1, lines: length, exempt: above.includes(EXEMPT_MARK) });
      }
    }
    node.forEachChild(visit);
  };
  source.forEachChild(visit);
  return found;
}

/** Relative imports of a file (static, re-exports, dynamic and type-only), resolved to files. */
function importedFiles(file: string, text: string): string[] {
  const specifiers = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^import\s*)["'](\.[^"']+)["']/gm)].map((m) => m[1]!);
  return specifiers.flatMap((specifier) => {
    const base = resolve(dirname(file), specifier).replace(/\.js$/, "");
    const hit = [`${base}.ts`, join(base, "index.ts")].find((candidate) => existsSync(candidate));
    return hit ? [hit] : [];
  });
}

/** Tarjan's strongly connected components; a component of two or more nodes is a cycle. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (node: string): void => {
    order.set(node, index);
    low.set(node, index);
    index++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!order.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, order.get(next)!));
    }
    if (low.get(node) !== order.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) components.push(component.sort());
  };
  for (const node of graph.keys()) if (!order.has(node)) connect(node);
  return components;
}

MAY_IMPORT.http!.push("responses", "chat-store");
MAY_IMPORT.server = MAY_IMPORT.http!;

const folderOf = (file: string): string => {
  const parts = relative(SRC, file).split("/");
  return parts.length === 1 ? parts[0]!.replace(/\.ts$/, "") : parts[0]!;
};

const files = sourceFiles(SRC);
const api = new API({ cwd: ROOT });
const program = api.updateSnapshot({ openProject: join(ROOT, "tsconfig.json") }).getProject(join(ROOT, "tsconfig.json"))!.program;
const fileGraph = new Map<string, Set<string>>();
const folderGraph = new Map<string, Set<string>>();
const long: LongFunction[] = [];
const violations: string[] = [];
for (const file of files) {
  const text = readFileSync(file, "utf8");
  const source = program.getSourceFile(file)!;
  const rel = relative(ROOT, file);
  long.push(...longFunctions(rel, source, text));
  const targets = importedFiles(file, text);
  fileGraph.set(rel, new Set(targets.map((target) => relative(ROOT, target))));
  const from = folderOf(file);
  for (const target of targets) {
    const to = folderOf(target);
    if (to === from) continue;
    if (!folderGraph.has(from)) folderGraph.set(from, new Set());
    folderGraph.get(from)!.add(to);
    const allowed = MAY_IMPORT[from];
    if (allowed && !allowed.includes("*") && !allowed.includes(to)) violations.push(`${rel} -> ${relative(ROOT, target)}`);
    if (!allowed) violations.push(`${rel} -> ${relative(ROOT, target)} (folder ${from} has no layer)`);
  }
}

api.close();

/** Where an endpoint may be declared outside api/: the pages that are no API (health, metrics, the console, docs). */
const HTTP_PAGES = ["src/http/console.ts", "src/http/routes/health.ts", "src/http/routes/metrics.ts", "src/http/routes/docs.ts"];
/** The transport that reads a request's raw input by design: the one route adapter, the JSON parser, deployment forwarding. */
const RAW_INPUT_READERS = ["src/http/endpoint-routes.ts", "src/http/edge-input.ts", "src/http/deployment-forwarding.ts"];

/**
 * Places that list endpoints by hand: the files of src/ that name resources' declarations one by
 * one, by importing (as values) from a resource's declaration module (api/<resource>/endpoints.ts
 * or operation.ts) outside that resource's folder, or by reading the registry's by-resource views
 * (createEndpoints, ENDPOINT_SPECS) and naming the resources there. The registry (api/registry.ts)
 * is the one such place meant to be.
 */
function placesListingEndpoints(): string[] {
  const declarationModule = /^src\/api\/([^/]+)\/(?:endpoints|operation)\.ts$/;
  return files.flatMap((file) => {
    const rel = relative(ROOT, file);
    const text = readFileSync(file, "utf8");
    const valueImports = [...text.matchAll(/^import\s+(?!type\b)[^;]*?\bfrom\s*["'](\.[^"']+)["']/gm)].map((m) => m[1]!);
    const namesDeclarations = valueImports.some((specifier) => {
      const target = relative(ROOT, resolve(dirname(file), specifier).replace(/\.js$/, ".ts"));
      const resource = declarationModule.exec(target)?.[1];
      return resource !== undefined && !rel.startsWith(`src/api/${resource}/`);
    });
    const readsByResource = rel !== "src/api/registry.ts" && /\b(?:createEndpoints|ENDPOINT_SPECS)\b/.test(text);
    return namesDeclarations || readsByResource ? [rel] : [];
  });
}

/** Occurrences of `pattern` in the files `include` keeps, by file. */
function occurrences(pattern: RegExp, include: (rel: string) => boolean): Array<[string, number]> {
  return files
    .map((file) => relative(ROOT, file))
    .filter(include)
    .map((rel): [string, number] => [rel, readFileSync(join(ROOT, rel), "utf8").match(pattern)?.length ?? 0])
    .filter(([, count]) => count > 0);
}

const sum = (found: Array<[string, number]>) => found.reduce((total, [, count]) => total + count, 0);
// An endpoint declaration: an object that opens with its method and path (api/endpoint.ts's EndpointSpec).
const declarations = occurrences(/^\s+method: "(?:get|post|patch|delete)",\n\s+path: "/gm, (rel) => !rel.startsWith("src/api/"));
const ownInput = occurrences(/\brequest\.(?:body|query)\b/g, (rel) => rel.startsWith("src/http/") && !RAW_INPUT_READERS.includes(rel));
// `process.env`, and a variable read by its name from an environment handed in (`env.SWITCHYARD_…`, `env["…"]`).
const envReads = occurrences(/\bprocess\.env\b|\benv\??\.[A-Z][A-Z0-9_]*\b|\benv\[["'`]/g, (rel) => !rel.startsWith("src/config/"));
const endpointLists = placesListingEndpoints();
const fileCycles = cycles(fileGraph);
const folderCycles = cycles(folderGraph);
const overLimit = long.filter((fn) => !fn.exempt);
console.log(`functions over ${MAX_LINES} lines: ${overLimit.length} (+${long.length - overLimit.length} exempt with a reason)`);
console.log(`file import cycles: ${fileCycles.length}`);
console.log(`folder import cycles: ${folderCycles.length}`);
console.log(`imports against the layering: ${violations.length}`);
const counts: Record<string, number> = {
  "functions over 60 lines": overLimit.length,
  "file import cycles": fileCycles.length,
  "folder import cycles": folderCycles.length,
  "imports against the layering": violations.length,
  "endpoints declared outside src/api/": sum(declarations.filter(([rel]) => !HTTP_PAGES.includes(rel))),
  "handlers that read their own body or query": sum(ownInput),
  "environment reads outside src/config/": sum(envReads),
  "places that list endpoints by hand": endpointLists.length,
};
const pages = sum(declarations.filter(([rel]) => HTTP_PAGES.includes(rel)));
console.log(`endpoints declared outside src/api/: ${counts["endpoints declared outside src/api/"]} (+${pages} pages that stay in http/)`);
console.log(`handlers that read their own body or query: ${counts["handlers that read their own body or query"]}`);
console.log(`environment reads outside src/config/: ${counts["environment reads outside src/config/"]}`);
console.log(`places that list endpoints by hand: ${endpointLists.length} (target 1, the registry)`);
if (list) {
  for (const [rel, count] of declarations) console.log(`  endpoints declared in ${rel}: ${count}`);
  for (const [rel, count] of ownInput) console.log(`  raw request input read in ${rel}: ${count}`);
  for (const [rel, count] of envReads) console.log(`  environment read in ${rel}: ${count}`);
  for (const rel of endpointLists) console.log(`  endpoints listed by hand in ${rel}`);
}
if (list) {
  for (const fn of long) console.log(`  long ${fn.file}:${fn.line} ${fn.name} ${fn.lines} lines${fn.exempt ? " (exempt)" : ""}`);
  for (const cycle of fileCycles) console.log(`  file cycle: ${cycle.join(" ⇄ ")}`);
  for (const cycle of folderCycles) console.log(`  folder cycle: ${cycle.join(" ⇄ ")}`);
  for (const violation of violations) console.log(`  layering: ${violation}`);
}

/**
 * Fails when a count rose above the recorded baseline (scripts/shape-baseline.json; older commits
 * have none). Lower the baseline as the counts fall: `--record` writes today's counts there.
 */
const BASELINE = join(ROOT, "scripts/shape-baseline.json");
if (process.argv.includes("--record")) writeFileSync(BASELINE, `${JSON.stringify(counts, null, 2)}\n`);
else if (existsSync(BASELINE)) {
  const baseline = JSON.parse(readFileSync(BASELINE, "utf8")) as Record<string, number>;
  const worse = Object.entries(counts).filter(([measure, count]) => count > (baseline[measure] ?? 0));
  for (const [measure, count] of worse) console.error(`regression: ${measure}: ${count}, baseline ${baseline[measure] ?? 0}`);
  if (worse.length > 0) process.exitCode = 1;
}
