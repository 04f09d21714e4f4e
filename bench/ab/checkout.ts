import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");

/**
 * A built copy of the checkout at `ref`, outside the repository (~/.cache/switchyard/ab/<commit>),
 * made once per commit: `git archive` of the commit, this checkout's node_modules linked in when
 * the lockfiles match (else `npm ci` there), then `npm run build`. "." is this checkout as it is.
 */
export function builtCheckout(ref: string): { dir: string; commit: string } {
  if (ref === ".") return { dir: ROOT, commit: "working tree" };
  const commit = execFileSync("git", ["rev-parse", "--verify", `${ref}^{commit}`], { cwd: ROOT, encoding: "utf8" }).trim();
  const dir = join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "switchyard", "ab", commit);
  const ready = join(dir, ".ab-ready");
  if (existsSync(ready)) return { dir, commit };
  process.stderr.write(`building ${ref} (${commit.slice(0, 10)}) in ${dir}...\n`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const archive = spawnSync("git", ["archive", "--format=tar", commit], { cwd: ROOT, maxBuffer: 1 << 30 });
  if (archive.status !== 0) throw new Error(`git archive ${commit} failed: ${archive.stderr}`);
  execFileSync("tar", ["-x", "-C", dir], { input: archive.stdout });
  const lock = (root: string) => readFileSync(join(root, "package-lock.json"), "utf8");
  const sameDependencies = lock(dir) === lock(ROOT) && existsSync(join(ROOT, "node_modules"));
  if (sameDependencies) symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  else execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
  execFileSync("npm", ["run", "build"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
  writeFileSync(ready, `${new Date().toISOString()}\n`);
  return { dir, commit };
}

/** Builds this checkout's server (dist/) from its sources, so "head" runs what is on disk now. */
export function buildHead(): void {
  execFileSync("npx", ["tsc", "-p", "tsconfig.json"], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
}

/** `KEY=VALUE,KEY=VALUE` as an environment. */
export function parseEnv(list: string | undefined): Record<string, string> {
  if (!list) return {};
  return Object.fromEntries(
    list.split(",").map((pair) => {
      const at = pair.indexOf("=");
      if (at <= 0) throw new Error(`not KEY=VALUE: ${pair}`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}
