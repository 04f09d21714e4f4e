import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, test } from "node:test";
import { connectionCaps, loadSettings } from "../../src/config/settings.js";
import { raiseFileLimit, readFileLimit } from "../../src/http/file-limit.js";

const linux = process.platform === "linux" && (process.arch === "x64" || process.arch === "arm64");

describe(
  "the open-file limit (issue 30 item 3)",
  { skip: linux ? false : "RLIMIT_NOFILE is read through Linux x86-64/arm64's libc" },
  () => {
    test("readFileLimit reads what the kernel says in /proc/self/limits", async () => {
      const limit = await readFileLimit();
      assert.ok(limit);
      const line = execFileSync("grep", ["Max open files", "/proc/self/limits"], { encoding: "utf8" });
      const [, soft, hard] = /Max open files\s+(\S+)\s+(\S+)/.exec(line)!;
      assert.equal(limit.soft, soft === "unlimited" ? Infinity : Number(soft));
      assert.equal(limit.hard, hard === "unlimited" ? Infinity : Number(hard));
    });

    test("a soft limit lowered below the hard one is raised back to it, and the new soft limit is returned", async (t) => {
      const { hard } = (await readFileLimit())!;
      if (!Number.isFinite(hard) || hard < 512) return t.skip(`hard limit ${hard}: nothing to lower and raise`);
      // Node raises the soft limit itself at start, so lower it first (soft only; the hard limit stays).
      execFileSync("prlimit", ["--pid", String(process.pid), "--nofile=256:"]);
      assert.equal((await readFileLimit())!.soft, 256);
      const raised = await raiseFileLimit();
      assert.deepEqual(raised, { before: 256, soft: hard, hard, raised: true });
      assert.equal((await readFileLimit())!.soft, hard);
      // Already at the hard limit: nothing to do, and it says so.
      assert.deepEqual(await raiseFileLimit(), { before: hard, soft: hard, hard, raised: false });
    });
  },
);

describe("connection caps from the settings and the open-file limit", () => {
  const settings = (env: Record<string, string> = {}) => loadSettings({}, env);

  test("by default the total leaves a tenth of the descriptors (at least 256) for files, and a twentieth of it is kept from keys", () => {
    assert.deepEqual(connectionCaps(settings(), 20_000), {
      total: 18_000,
      reserve: 900,
      perKey: 512,
      perAccount: 1024,
      keepAliveTimeoutMs: 72_000,
    });
    assert.deepEqual(connectionCaps(settings(), 1024), {
      total: 768,
      reserve: 38,
      perKey: 512,
      perAccount: 730,
      keepAliveTimeoutMs: 72_000,
    });
  });

  test("a total above the descriptors is clamped below them; no key or account may take the reserve", () => {
    const env = {
      SWITCHYARD_MAX_CONNECTIONS: "5000",
      SWITCHYARD_CONNECTION_RESERVE: "100",
      SWITCHYARD_MAX_CONNECTIONS_PER_KEY: "4000",
      SWITCHYARD_MAX_CONNECTIONS_PER_ACCOUNT: "9000",
    };
    assert.deepEqual(connectionCaps(settings(env), 2048), {
      total: 1792,
      reserve: 100,
      perKey: 1692,
      perAccount: 1692,
      keepAliveTimeoutMs: 72_000,
    });
    assert.deepEqual(connectionCaps(settings(env), 100_000), {
      total: 5000,
      reserve: 100,
      perKey: 4000,
      perAccount: 4900,
      keepAliveTimeoutMs: 72_000,
    });
    // The reserve is at most half the total.
    assert.equal(connectionCaps(settings({ SWITCHYARD_MAX_CONNECTIONS: "40", SWITCHYARD_CONNECTION_RESERVE: "30" }), 20_000).reserve, 20);
  });

  test("out-of-range values are refused at start, naming the setting", () => {
    assert.throws(() => settings({ SWITCHYARD_MAX_CONNECTIONS_PER_KEY: "0" }), /connections\.perKey/);
    assert.throws(() => settings({ SWITCHYARD_MAX_CONNECTIONS: "3" }), /connections\.total/);
    assert.throws(() => settings({ SWITCHYARD_KEEP_ALIVE_TIMEOUT_MS: "10" }), /connections\.keepAliveTimeoutMs/);
  });
});
