/**
 * Runs the test files that reach a file changed since a ref: `npm run test:changed [-- REF] [--list]`.
 * Changed: what differs from the merge base of HEAD and REF (default origin/main where it exists,
 * else main), committed or not, plus untracked files. A test is selected when its imports reach a
 * changed file (TypeScript specifiers, `.js` read as `.ts`), or when it starts the built server and
 * the change is in what the server runs (src/, catalog/). A change the graph cannot place (package.json,
 * scripts/, tsconfig, ...) selects every test: when in doubt, run more. `--list` prints and runs nothing.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
const TEST_DIRS = ["test/unit", "test/integration", "test/browser"];
/** A file that starts the built server (bin/switchyard.js → dist/) runs all of src/ without importing it. */
const STARTS_SERVER = /\b(startServer|createKey|cli)\(|\bCLI\b|bin\/switchyard|\bdist\//;
const SERVER_ENTRY = join(ROOT, "src/cli/main.ts");

const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();
const lines = (text: string) => text.split("\n").filter(Boolean);

function defaultRef(): string {
  const has = (ref: string) => spawnSync("git", ["rev-parse", "--verify", "--quiet", ref], { cwd: ROOT }).status === 0;
  return has("origin/main") ? "origin/main" : "main";
}

function changedFiles(ref: string): Set<string> {
  const base = git("merge-base", "HEAD", ref);
  const tracked = lines(git("diff", "--name-only", base));
  const untracked = lines(git("ls-files", "--others", "--exclude-standard"));
  return new Set([...tracked, ...untracked].map((path) => join(ROOT, path)));
}

/** Where a relative specifier points, as a file that exists: `.js` → `.ts`/`.tsx`, a folder → its index. */
function resolveSpecifier(from: string, specifier: string): string | undefined {
  const target = resolve(dirname(from), specifier);
  const candidates = [target, target.replace(/\.js$/, ".ts"), target.replace(/\.js$/, ".tsx"), `${target}.ts`, join(target, "index.ts")];
  return candidates.find((path) => existsSync(path) && statSync(path).isFile());
}

const importsCache = new Map<string, string[]>();
function importsOf(file: string): string[] {
  let imports = importsCache.get(file);
  if (!imports) {
    const text = readFileSync(file, "utf8");
    const specifiers = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g)].map((match) => match[1]!);
    imports = specifiers.flatMap((specifier) => resolveSpecifier(file, specifier) ?? []);
    if (!file.endsWith("helpers/server.ts") && file.startsWith(join(ROOT, "test")) && STARTS_SERVER.test(text)) imports.push(SERVER_ENTRY);
    importsCache.set(file, imports);
  }
  return imports;
}

function reaches(test: string, changed: ReadonlySet<string>, startsServerChanged: boolean): boolean {
  const seen = new Set<string>();
  const queue = [test];
  while (queue.length) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    if (changed.has(file) || (file === SERVER_ENTRY && startsServerChanged)) return true;
    if (/\.(ts|tsx)$/.test(file)) queue.push(...importsOf(file));
  }
  return false;
}

export const TEST_FILES = TEST_DIRS.flatMap((dir) =>
  readdirSync(join(ROOT, dir))
    .filter((name) => name.endsWith(".test.ts"))
    .map((name) => join(ROOT, dir, name)),
);
const inGraph = (path: string) => /\.(ts|tsx)$/.test(path) && /^(src|test|console|bench|scripts)\//.test(relative(ROOT, path));
const isDoc = (path: string) => path.endsWith(".md") || relative(ROOT, path).startsWith("docs/");
const DOCS_TEST = join(ROOT, "test/unit/docs.test.ts");

/** The test files a set of changed files (absolute paths) selects, and the changes outside the graph that made it all of them. */
export function selectTests(changed: ReadonlySet<string>): { selected: string[]; unplaced: string[] } {
  const serverData = [...changed].some((path) => /^(src|catalog)\//.test(relative(ROOT, path)));
  const unplaced = [...changed].filter(
    (path) => existsSync(path) && !inGraph(path) && !isDoc(path) && !relative(ROOT, path).startsWith("catalog/"),
  );
  if (unplaced.length) return { selected: TEST_FILES, unplaced };
  const docChanged = [...changed].some(isDoc);
  return { selected: TEST_FILES.filter((test) => reaches(test, changed, serverData) || (test === DOCS_TEST && docChanged)), unplaced };
}

function main(args: string[]): void {
  const ref = args.find((arg) => !arg.startsWith("--")) ?? defaultRef();
  const changed = changedFiles(ref);
  const { selected, unplaced } = selectTests(changed);
  const outside = unplaced.map((path) => relative(ROOT, path)).join(", ");
  console.error(
    `${changed.size} files changed since ${ref}; ${selected.length} of ${TEST_FILES.length} test files selected` +
      (unplaced.length ? ` (all of them: ${outside} is outside the import graph)` : ""),
  );
  if (args.includes("--list")) {
    process.stdout.write(selected.map((test) => `${relative(ROOT, test)}\n`).join(""));
  } else if (selected.length) {
    const files = selected.map((test) => relative(ROOT, test));
    const run = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=2", "--test-force-exit", ...files], {
      cwd: ROOT,
      stdio: "inherit",
    });
    process.exit(run.status ?? 1);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) main(process.argv.slice(2));
