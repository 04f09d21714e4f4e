import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT, waitFor } from "../helpers/server.js";

/**
 * The shared default server's life (test/helpers/shared-server.ts), through a test run of its own:
 * two files run at once get one server and an account each, and it is gone, data dir included,
 * once their runner has exited.
 */
test("two files of one run share one server, each on its own account, stopped with the run", async () => {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-shared-test-"));
  try {
    const file = (name: string) => {
      const path = join(dir, `${name}.test.mts`);
      writeFileSync(
        path,
        `import { test } from "node:test";
import { sharedServer } from ${JSON.stringify(join(ROOT, "test/helpers/shared-server.ts"))};
test("${name}", async () => {
  const server = await sharedServer();
  const usage = await fetch(server.url + "/v1/usage", { headers: { authorization: "Bearer " + server.key } });
  const { totals } = await usage.json();
  console.log("SHARED " + JSON.stringify({ url: server.url, dataDir: server.dataDir, account: server.account, status: usage.status, requests: totals.requests }));
});
`,
      );
      return path;
    };
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", "--test", "--test-concurrency=2", "--test-reporter=tap", file("a"), file("b")],
      {
        cwd: ROOT,
        encoding: "utf8",
        // A runner of its own: with this process's NODE_TEST_CONTEXT it would report to it in V8's format.
        env: { ...process.env, NODE_TEST_CONTEXT: undefined },
      },
    );
    assert.equal(run.status, 0, run.stdout + run.stderr);
    const seen = [...run.stdout.matchAll(/SHARED (\{.*\})/g)].map(
      (m) => JSON.parse(m[1]!) as { url: string; dataDir: string; account: string; status: number; requests: number },
    );
    assert.equal(seen.length, 2, run.stdout);
    const [a, b] = seen as [(typeof seen)[0], (typeof seen)[0]];
    assert.equal(a.url, b.url, "one server");
    assert.notEqual(a.account, b.account, "an account each");
    for (const one of seen) assert.deepEqual([one.status, one.requests], [200, 0], "each key works, on an account with no usage yet");
    await waitFor(async () => ((await fetch(`${a.url}/health`).catch(() => undefined)) ? undefined : true), 30_000);
    await waitFor(async () => (existsSync(a.dataDir) ? undefined : true), 30_000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
