import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { alive } from "../helpers/shared-server.js";
import { reapOnExit, ROOT, waitFor } from "../helpers/server.js";

/**
 * The shared server's life (test/helpers/shared-server.ts), through a test run of its own whose
 * three files run at once and take their turns by marker files:
 * - a and b share one server, each on an account of its own;
 * - a and b lease at once from the pool of exclusive servers: two servers;
 * - a gives its lease back, and c, leasing while b still holds the other, gets a's server;
 * - b exits holding its lease, and a, leasing again while c holds the first, takes b's over;
 * - c's start of a server that cannot start fails at once and leaves no directory behind;
 * - the runner exits but is never reaped (its parent `exec`s a `sleep`): a zombie, which `kill -0`
 *   still finds. Every server stops all the same, and nothing of theirs is left in the temp dir.
 */
const FILES: Record<string, string> = {
  a: `const shared = await sharedServer();
const usage = await fetch(shared.url + "/v1/usage", { headers: { authorization: "Bearer " + shared.key } });
record("shared", { url: shared.url, dataDir: shared.dataDir, account: shared.account, status: usage.status, requests: (await usage.json()).totals.requests });
const lease = await sharedServer({ exclusive: true });
record("lease", { url: lease.url, dataDir: lease.dataDir });
mark("a-leased");
await until("b-leased");
await lease.stop();
mark("a-released");
const b = Number(await until("b-leased"));
await until("c-leased");
while (existsSync("/proc/" + b)) await sleep(100);
const again = await sharedServer({ exclusive: true });
record("again", { url: again.url });
await again.stop();
mark("a-again");`,
  b: `await until("a-leased");
const shared = await sharedServer();
const usage = await fetch(shared.url + "/v1/usage", { headers: { authorization: "Bearer " + shared.key } });
record("shared", { url: shared.url, dataDir: shared.dataDir, account: shared.account, status: usage.status, requests: (await usage.json()).totals.requests });
const lease = await sharedServer({ exclusive: true });
record("lease", { url: lease.url, dataDir: lease.dataDir });
mark("b-leased", String(process.pid));
await until("c-leased"); // and exits holding its lease`,
  c: `await until("a-released");
const lease = await sharedServer({ exclusive: true });
record("lease", { url: lease.url, dataDir: lease.dataDir });
const failed = await sharedServer({ exclusive: true, env: { SWITCHYARD_PARALLEL: "none" } }).then(() => "started", (e) => e.message);
record("failed", { message: failed });
mark("c-leased");
await until("a-again");
await lease.stop();`,
};

function childFile(dir: string, name: string): string {
  const path = join(dir, `${name}.test.mts`);
  writeFileSync(
    path,
    `import { test } from "node:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { sharedServer } from ${JSON.stringify(join(ROOT, "test/helpers/shared-server.ts"))};
const dir = ${JSON.stringify(dir)};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mark = (what, text = "") => writeFileSync(dir + "/" + what, text);
const until = async (what) => { while (!existsSync(dir + "/" + what)) await sleep(100); return readFileSync(dir + "/" + what, "utf8"); };
const record = (what, value) => writeFileSync(dir + "/${name}." + what + ".json", JSON.stringify(value));
test("${name}", async () => {
${FILES[name]}
});
`,
  );
  return path;
}

/** The process's state letter from /proc (Z: exited, not yet reaped). */
const procState = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat[stat.lastIndexOf(") ") + 2];
};

test("one shared server per run, a pool of leased ones, gone with a runner that exited unreaped", { timeout: 900_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-shared-test-"));
  const files = ["a", "b", "c"].map((name) => childFile(dir, name));
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // a runner of its own: with this one's context it would report to it in V8's format
  // The runner in the background, its pid printed, then the shell becomes a `sleep` that never reaps it.
  const parent = reapOnExit(
    spawn(
      "sh",
      [
        "-c",
        '"$@" > "$0/out" 2>&1 & echo $!; exec sleep 3600',
        dir,
        process.execPath,
        "--import",
        "tsx",
        "--test",
        "--test-concurrency=3",
        "--test-reporter=tap",
        ...files,
      ],
      // A process group of its own, so a failure can stop the runner and its files with the shell.
      { cwd: ROOT, env, stdio: ["ignore", "pipe", "inherit"], detached: true },
    ),
  );
  let runner = 0;
  try {
    runner = Number(await new Promise<string>((resolve) => parent.stdout!.once("data", (d: Buffer) => resolve(d.toString()))));
    await waitFor(async () => (procState(runner) === "Z" ? true : undefined), 600_000);
    const output = readFileSync(join(dir, "out"), "utf8");
    assert.match(output, /^# pass 3$/m, output);
    assert.match(output, /^# fail 0$/m, output);
    const seen = (file: string) => JSON.parse(readFileSync(join(dir, `${file}.json`), "utf8"));
    const [sharedA, sharedB] = [seen("a.shared"), seen("b.shared")];
    assert.equal(sharedA.url, sharedB.url, "one shared server");
    assert.notEqual(sharedA.account, sharedB.account, "an account each");
    for (const one of [sharedA, sharedB])
      assert.deepEqual([one.status, one.requests], [200, 0], "each key works, on an account with no usage yet");
    const [leaseA, leaseB, leaseC] = [seen("a.lease"), seen("b.lease"), seen("c.lease")];
    assert.notEqual(leaseA.url, leaseB.url, "two files holding leases at once, two servers");
    assert.ok(![leaseA.url, leaseB.url].includes(sharedA.url), "the pool's servers are not the shared one");
    assert.equal(leaseC.url, leaseA.url, "the lease a gave back is c's, no new server");
    assert.equal(seen("a.again").url, leaseB.url, "the lease of b, which exited holding it, is taken over");
    assert.match(seen("c.failed").message, /the shared server did not start: it exited\n[\s\S]*Invalid setting 'parallel'/);
    assert.equal(alive(runner), false, "a zombie is not alive");
    // Every server stops with its zombie runner, its data dir and state with it.
    for (const url of [sharedA.url, leaseA.url, leaseB.url]) {
      await waitFor(async () => ((await fetch(`${url}/health`).catch(() => undefined)) ? undefined : true), 30_000);
    }
    for (const dataDir of [sharedA.dataDir, leaseA.dataDir, leaseB.dataDir])
      await waitFor(async () => (existsSync(dataDir) ? undefined : true), 30_000);
    const left = () => readdirSync(tmpdir()).filter((name) => name.startsWith(`switchyard-shared-${runner}-`));
    await waitFor(async () => (left().length === 0 ? true : undefined), 30_000).catch(() =>
      assert.deepEqual(left(), [], "nothing left in the temp dir"),
    );
  } finally {
    // The whole group: the sleep (the zombie runner goes to init, which reaps it) and, where the
    // test failed before the runner ended, the runner and its files, which would go on waiting for
    // their markers, and the servers they started in the group (their temp dirs are removed below).
    try {
      process.kill(-parent.pid!, "SIGKILL");
    } catch {
      // Already gone.
    }
    rmSync(dir, { recursive: true, force: true });
    // What servers killed with the group could not clear (after a pass there is nothing).
    if (runner > 0)
      for (const name of readdirSync(tmpdir()).filter((n) => n.startsWith(`switchyard-shared-${runner}-`)))
        rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
});
