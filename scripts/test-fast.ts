/**
 * `npm run test:fast`: the unit tests that need no model, no build and no PostgreSQL, storage on
 * PGlite only (SWITCHYARD_TEST_DATABASES=pglite). No pretest runs. A new unit test is in this tier
 * unless it is listed below with the reason it is not; `npm test` runs every file.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");

/** Unit tests that read a pulled model from the models cache, so belong to the full run only. */
export const NEEDS_MODEL: Readonly<Record<string, string>> = {
  "deployment-guards.test.ts": "loads the pulled SmolLM2 file to estimate an instance's memory",
  "reasoning-split.test.ts": "tokenizes with the pulled SmolLM2 and Gemma models",
  "served-format.test.ts": "re-encodes the pulled SmolLM2 file to F16",
  "tokenize-pieces.test.ts": "tokenizes with the pulled SmolLM2 and Gemma models",
};

const files = readdirSync(resolve(ROOT, "test/unit"))
  .filter((name) => name.endsWith(".test.ts") && !(name in NEEDS_MODEL))
  .sort()
  .map((name) => `test/unit/${name}`);
const run = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", "--test-concurrency=2", "--test-force-exit", ...process.argv.slice(2), ...files],
  { cwd: ROOT, stdio: "inherit", env: { ...process.env, SWITCHYARD_TEST_DATABASES: "pglite" } },
);
process.exit(run.status ?? 1);
