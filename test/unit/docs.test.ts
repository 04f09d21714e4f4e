// The documentation against itself and the code: every relative link and #anchor in README.md and
// docs/ resolves (GitHub's anchors), every page is reachable from the README, every SWITCHYARD_*
// setting the docs name exists in the code, every one src/ reads is documented, and the settings
// page's table is the one generated from src/config/settings-reference.ts, and the API page's
// endpoint table the one generated from the endpoint declarations.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { API_PAGE, withEndpointTable } from "../../scripts/docs-endpoints.js";
import { SETTINGS_PAGE, withGeneratedTable } from "../../scripts/docs-settings.js";
import { SETTINGS_REFERENCE } from "../../src/config/settings-reference.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

function filesUnder(dir: string, keep: (path: string) => boolean): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : filesUnder(path, keep);
    return keep(path) ? [path] : [];
  });
}

const isMarkdown = (path: string) => path.endsWith(".md");
const pages = [join(ROOT, "README.md"), join(ROOT, "src/engine/core/README.md"), ...filesUnder(join(ROOT, "docs"), isMarkdown)];

/** The page's text outside fenced code blocks and inline code, where links and headings live. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split("\n").flatMap((line) => {
    if (line.trimStart().startsWith("```")) {
      fenced = !fenced;
      return [];
    }
    return fenced ? [] : [line.replace(/`[^`]*`/g, "``")];
  });
}

/** GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(path: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.trimStart().startsWith("```")) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6} (.+)$/.exec(line);
    if (!heading) continue;
    const text = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/[`*]/g, "");
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, "")
      .replace(/ /g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

interface Link {
  page: string;
  target: string;
}

function linksOf(page: string): Link[] {
  const links: Link[] = [];
  for (const line of prose(readFileSync(page, "utf8"))) {
    for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1]!;
      if (!/^[a-z]+:/i.test(target)) links.push({ page, target });
    }
  }
  return links;
}

/** Where a relative link points: the file (the page itself for a bare #anchor) and the anchor. */
function resolveLink({ page, target }: Link): { file: string; anchor?: string } {
  const [path, anchor] = target.split("#", 2) as [string, string | undefined];
  return { file: path ? resolve(dirname(page), decodeURI(path)) : page, anchor };
}

test("every relative link and anchor in README.md and docs/ resolves", () => {
  const broken: string[] = [];
  for (const link of pages.flatMap(linksOf)) {
    const { file, anchor } = resolveLink(link);
    const where = `${relative(ROOT, link.page)}: ${link.target}`;
    if (!existsSync(file)) broken.push(`${where} (no such file)`);
    else if (anchor && (!isMarkdown(file) || !anchorsOf(file).has(anchor))) broken.push(`${where} (no such anchor)`);
  }
  assert.deepEqual(broken, []);
});

test("every page under docs/ is reachable from README.md by links", () => {
  const reached = new Set<string>();
  const queue = [join(ROOT, "README.md")];
  while (queue.length) {
    const page = queue.pop()!;
    if (reached.has(page)) continue;
    reached.add(page);
    for (const link of linksOf(page)) {
      const { file } = resolveLink(link);
      if (isMarkdown(file) && existsSync(file) && statSync(file).isFile()) queue.push(file);
    }
  }
  const unreached = pages.filter((page) => !reached.has(page)).map((page) => relative(ROOT, page));
  assert.deepEqual(unreached, []);
});

// A name ending in `_*` (SWITCHYARD_STANDARD_*) speaks of a family, not of one variable.
const settingNames = (text: string) => new Set(text.match(/SWITCHYARD_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_])/g) ?? []);
const codeFiles = ["src", "test", "bench", "scripts", "bin", "console/src", ".ci"].flatMap((dir) =>
  filesUnder(join(ROOT, dir), (path) => /\.(ts|tsx|js|sh|py)$/.test(path) || dir === ".ci"),
);

test("every SWITCHYARD_* setting the docs name exists in the code", () => {
  const inCode = new Set(codeFiles.flatMap((path) => [...settingNames(readFileSync(path, "utf8"))]));
  const named = new Set(pages.flatMap((page) => [...settingNames(readFileSync(page, "utf8"))]));
  const missing = [...named].filter((name) => !inCode.has(name)).sort();
  assert.deepEqual(missing, [], "named in the docs, read nowhere in the code");
});

test("every SWITCHYARD_* variable src/ reads has a row in the settings reference", () => {
  const documented = new Set(SETTINGS_REFERENCE.flatMap((row) => row.variables));
  const read = new Set(
    codeFiles
      .filter((path) => path.startsWith(join(ROOT, "src")) && !path.endsWith("settings-reference.ts"))
      .flatMap((path) => [...settingNames(readFileSync(path, "utf8"))]),
  );
  assert.deepEqual([...read].filter((name) => !documented.has(name)).sort(), [], "read by src/, missing from settings-reference.ts");
  assert.deepEqual([...documented].filter((name) => !read.has(name)).sort(), [], "documented, read nowhere in src/");
});

test("docs/operations/settings.md's table is the one generated from the code (npm run docs:settings)", () => {
  const page = readFileSync(SETTINGS_PAGE, "utf8");
  assert.equal(page, withGeneratedTable(page));
});

test("docs/api/README.md's endpoint table is the one generated from the endpoint declarations (npm run docs:endpoints)", () => {
  const page = readFileSync(API_PAGE, "utf8");
  assert.equal(page, withEndpointTable(page));
});
