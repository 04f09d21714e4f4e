import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { generateAdminToken, removeServerFile, serverFilePath, writeServerFile } from "../../src/accounts/local-server.js";
import { authenticate } from "../../src/accounts/principals.js";
import { keysCommand } from "../../src/cli/keys.js";
import type { Database } from "../../src/storage/database.js";
import { openDatabase } from "../../src/storage/open.js";
import { startAdminServer } from "../helpers/admin-server.js";
import { migratedDataDir } from "../helpers/databases.js";

/** Runs `switchyard keys ...args` in-process and returns its stdout lines. */
async function runKeys(...args: string[]): Promise<string[]> {
  let output = "";
  await keysCommand({ stdout: { write: (text: string) => (output += text) } }).parseAsync(args, { from: "user" });
  return output.trimEnd().split("\n");
}

// These tests exercise the embedded database; a PostgreSQL URL in the environment would bypass it.
const savedDatabaseUrl = process.env.SWITCHYARD_DATABASE_URL;
before(() => {
  delete process.env.SWITCHYARD_DATABASE_URL;
});
after(() => {
  if (savedDatabaseUrl !== undefined) process.env.SWITCHYARD_DATABASE_URL = savedDatabaseUrl;
});

/** A created and migrated embedded database, copied into each test's data dir: initdb and the migrations took seconds a test. */
let template: string;
before(async () => {
  template = await migratedDataDir("switchyard-cli-template-");
});
after(async () => {
  await rm(template, { recursive: true, force: true });
});

let dataDir: string;
beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "switchyard-cli-"));
  execFileSync("cp", ["-a", `${template}/.`, dataDir]); // -a: the owner-only modes come along
});
afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe("keys CLI without a server (opens the database itself)", () => {
  test("create prints the key alone on the last line; list shows it; revoke revokes it", async () => {
    const created = await runKeys(
      "create",
      "--account",
      "acme",
      "--name",
      "laptop",
      "--expires-in-days",
      "30",
      "--models",
      "qwen, llama",
      "--data-dir",
      dataDir,
    );
    const key = created.at(-1)!;
    assert.match(key, /^sk-sy-[A-Za-z0-9_-]{43}$/);
    assert.ok(created.length > 1, "a summary comes before the key");
    assert.ok(
      created.slice(0, -1).every((line) => !line.includes(key)),
      "the key is printed only once",
    );
    const id = /key_[A-Za-z0-9_-]+/.exec(created.join("\n"))![0];

    const table = (await runKeys("list", "--data-dir", dataDir)).join("\n");
    assert.match(table, /^ID\s+ACCOUNT\s+NAME\s+PREFIX\s+CREATED\s+EXPIRES\s+REVOKED\s+LAST USED/);
    assert.ok(table.includes(id) && table.includes("acme") && table.includes("laptop") && table.includes(key.slice(0, 12)));
    assert.ok(!table.includes(key));

    const json = JSON.parse((await runKeys("list", "--json", "--account", "acme", "--data-dir", dataDir)).join("\n"));
    assert.equal(json.length, 1);
    assert.equal(json[0].id, id);
    assert.deepEqual(json[0].allowed_models, ["qwen", "llama"]);
    assert.equal(json[0].revoked_at, null);
    assert.ok(json[0].expires_at > Date.now() / 1000 + 29 * 86_400);

    assert.deepEqual(await runKeys("revoke", id, "--data-dir", dataDir), [`Revoked ${id}.`]);
    const afterRevoke = JSON.parse((await runKeys("list", "--json", "--data-dir", dataDir)).join("\n"));
    assert.equal(typeof afterRevoke[0].revoked_at, "number");

    const db = await openDatabase({ dataDir });
    try {
      assert.equal(await authenticate(db, key), null);
    } finally {
      await db.close();
    }
  });

  test("create takes --rpm, --tpm and --budget; list shows them; set-limits changes them", async () => {
    const created = await runKeys(
      "create",
      "--account",
      "limited",
      "--rpm",
      "60",
      "--tpm",
      "90000",
      "--budget",
      "25.50",
      "--data-dir",
      dataDir,
    );
    assert.ok(
      created.some((line) => line.includes("60 RPM, 90000 TPM, budget $25.5 (spent $0)")),
      created.join("\n"),
    );
    const id = /key_[A-Za-z0-9_-]+/.exec(created.join("\n"))![0];

    const table = await runKeys("list", "--data-dir", dataDir);
    assert.match(table[0]!, /LAST USED\s+RPM\s+TPM\s+BUDGET USD\s+SPENT USD\s+MANAGE KEYS\s+MANAGE DEPLOYMENTS$/);
    assert.match(
      table.find((line) => line.includes(id))!,
      /\s60\s+90000\s+25\.5\s+0\s+no\s+no$/,
    );

    const [json] = JSON.parse((await runKeys("list", "--json", "--data-dir", dataDir)).join("\n"));
    assert.deepEqual([json.rpm_limit, json.tpm_limit, json.budget_usd, json.spent_usd], [60, 90000, "25.5", "0"]);

    assert.deepEqual(await runKeys("set-limits", id, "--rpm", "none", "--budget", "0.000001", "--data-dir", dataDir), [
      `Updated ${id}: server default RPM, 90000 TPM, budget $0.000001 (spent $0).`,
    ]);
    assert.match(
      (await runKeys("list", "--data-dir", dataDir)).find((line) => line.includes(id))!,
      /\sdefault\s+90000\s+0\.000001\s+0\s+no\s+no$/,
    );
    await assert.rejects(runKeys("set-limits", id, "--data-dir", dataDir), /Nothing to change/);
    await assert.rejects(runKeys("set-limits", "key_nope", "--tpm", "5", "--data-dir", dataDir), /No API key with id 'key_nope'/);

    const plain = await runKeys("create", "--account", "plain", "--data-dir", dataDir);
    assert.ok(plain.some((line) => line.includes("server default RPM, server default TPM, no budget")));
    const plainRow = (await runKeys("list", "--account", "plain", "--data-dir", dataDir))[1]!;
    assert.match(plainRow, /\sdefault\s+default\s+unlimited\s+0\s+no\s+no$/);
  });

  test("bad --rpm, --tpm and --budget values are refused before anything is created", async () => {
    const refuse = (...args: string[]) => {
      const command = keysCommand({ stdout: { write: () => true } });
      command.exitOverride().configureOutput({ writeErr: () => undefined });
      for (const sub of command.commands) sub.exitOverride().configureOutput({ writeErr: () => undefined });
      return assert.rejects(command.parseAsync(["create", "--account", "bad", ...args, "--data-dir", dataDir], { from: "user" }));
    };
    await refuse("--rpm", "0");
    await refuse("--tpm", "1.5");
    await refuse("--budget", "-3");
    await refuse("--budget", "1e3");
    assert.deepEqual(await runKeys("list", "--data-dir", dataDir), ["No API keys."]);
  });

  test("SWITCHYARD_DATA_DIR is the default data dir", async () => {
    const saved = process.env.SWITCHYARD_DATA_DIR;
    const empty = join(dataDir, "from-env");
    process.env.SWITCHYARD_DATA_DIR = empty;
    try {
      await runKeys("create", "--account", "env-default");
      assert.ok(existsSync(join(empty, "db")));
      assert.ok((await runKeys("list")).join("\n").includes("env-default"));
    } finally {
      if (saved === undefined) delete process.env.SWITCHYARD_DATA_DIR;
      else process.env.SWITCHYARD_DATA_DIR = saved;
    }
  });

  test("revoking an unknown id fails", async () => {
    await assert.rejects(runKeys("revoke", "key_nope", "--data-dir", dataDir), /No API key with id 'key_nope'/);
  });

  test("a stale server.json is ignored", async () => {
    const dead = spawnSync(process.execPath, ["-e", ""]).pid!;
    writeFileSync(serverFilePath(dataDir), JSON.stringify({ pid: dead, url: "http://127.0.0.1:9", adminToken: "stale" }));
    const created = await runKeys("create", "--account", "stale", "--data-dir", dataDir);
    assert.match(created.at(-1)!, /^sk-sy-/);
  });
});

describe("keys CLI: the manage-keys right, without a server", () => {
  test("--manage-keys grants it; keys have no right unless asked", async () => {
    const withRight = await runKeys("create", "--account", "ops", "--manage-keys", "--data-dir", dataDir);
    const without = await runKeys("create", "--account", "ops", "--data-dir", dataDir);
    assert.ok(withRight.includes("  rights:  manage keys") && without.includes("  rights:  none"));
    const table = (await runKeys("list", "--data-dir", dataDir)).slice(1);
    assert.deepEqual(table.map((line) => line.trim().split(/\s+/).at(-2)).sort(), ["no", "yes"]);
    const db = await openDatabase({ dataDir });
    try {
      assert.equal((await authenticate(db, withRight.at(-1)!))?.manageKeys, true);
      assert.equal((await authenticate(db, without.at(-1)!))?.manageKeys, false);
      assert.equal((await authenticate(db, without.at(-1)!))?.manageDeployments, false);
    } finally {
      await db.close();
    }
  });

  test("--manage-deployments grants that right alone; the listing shows it", async () => {
    const deployer = await runKeys("create", "--account", "deployers", "--manage-deployments", "--data-dir", dataDir);
    assert.ok(deployer.includes("  rights:  manage deployments"), deployer.join("\n"));
    const [json] = JSON.parse((await runKeys("list", "--json", "--account", "deployers", "--data-dir", dataDir)).join("\n"));
    assert.deepEqual([json.manage_keys, json.manage_deployments], [false, true]);
    const db = await openDatabase({ dataDir });
    try {
      const principal = await authenticate(db, deployer.at(-1)!);
      assert.deepEqual([principal?.manageKeys, principal?.manageDeployments], [false, true]);
    } finally {
      await db.close();
    }
  });
});

describe("keys CLI with a live server on the same data dir (goes through the admin API)", () => {
  let serverDb: Database;
  let app: FastifyInstance;
  let requests: string[];

  beforeEach(async () => {
    // The server holds the PGlite directory open, as `switchyard serve` would.
    serverDb = await openDatabase({ dataDir });
    const adminToken = generateAdminToken();
    const started = await startAdminServer(serverDb, adminToken);
    ({ app, requests } = started);
    writeServerFile(dataDir, { url: started.url, adminToken });
  });
  afterEach(async () => {
    removeServerFile(dataDir);
    await app.close();
    await serverDb.close();
  });

  test("create, list and revoke all work over HTTP", async () => {
    const created = await runKeys("create", "--account", "served", "--models", "qwen", "--expires-in-days", "1", "--data-dir", dataDir);
    const key = created.at(-1)!;
    assert.match(key, /^sk-sy-/);
    const principal = await authenticate(serverDb, key);
    assert.equal(principal?.accountName, "served");
    assert.deepEqual(principal?.allowedModels, ["qwen"]);

    const table = (await runKeys("list", "--account", "served", "--data-dir", dataDir)).join("\n");
    assert.ok(table.includes(principal!.keyId));

    assert.deepEqual(await runKeys("revoke", principal!.keyId, "--data-dir", dataDir), [`Revoked ${principal!.keyId}.`]);
    assert.equal(await authenticate(serverDb, key), null);

    assert.deepEqual(requests, ["POST /admin/v1/keys", "GET /admin/v1/keys?account=served", `DELETE /admin/v1/keys/${principal!.keyId}`]);
  });

  test("--manage-keys goes over HTTP too, and the key then manages its account", async () => {
    const created = await runKeys("create", "--account", "served-ops", "--manage-keys", "--data-dir", dataDir);
    assert.ok(created.includes("  rights:  manage keys"), created.join("\n"));
    assert.equal((await authenticate(serverDb, created.at(-1)!))?.manageKeys, true);
    const [json] = JSON.parse((await runKeys("list", "--json", "--account", "served-ops", "--data-dir", dataDir)).join("\n"));
    assert.equal(json.manage_keys, true);
    assert.equal(json.manage_deployments, false);
    const deployer = await runKeys("create", "--account", "served-ops", "--manage-deployments", "--data-dir", dataDir);
    assert.equal((await authenticate(serverDb, deployer.at(-1)!))?.manageDeployments, true, "the admin API carries the right too");
  });

  test("limits go over HTTP too", async () => {
    const created = await runKeys("create", "--account", "served-limits", "--rpm", "4", "--budget", "0.000006", "--data-dir", dataDir);
    const principal = await authenticate(serverDb, created.at(-1)!);
    assert.deepEqual(principal?.limits, { requestsPerMinute: 4, tokensPerMinute: null, budgetUsd: "0.000006" });
    await runKeys("set-limits", principal!.keyId, "--tpm", "500", "--budget", "none", "--data-dir", dataDir);
    assert.deepEqual((await authenticate(serverDb, created.at(-1)!))?.limits, {
      requestsPerMinute: 4,
      tokensPerMinute: 500,
      budgetUsd: null,
    });
    assert.ok(requests.includes(`PATCH /admin/v1/keys/${principal!.keyId}`));
    const [json] = JSON.parse((await runKeys("list", "--json", "--account", "served-limits", "--data-dir", dataDir)).join("\n"));
    assert.deepEqual([json.rpm_limit, json.tpm_limit, json.budget_usd, json.spent_usd], [4, 500, null, "0"]);
  });

  test("server errors come back as the same typed errors", async () => {
    await assert.rejects(runKeys("revoke", "key_nope", "--data-dir", dataDir), (error: unknown) => {
      assert.equal((error as { status?: number }).status, 404);
      assert.match((error as Error).message, /No API key with id 'key_nope'/);
      return true;
    });
  });
});
