import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, test } from "node:test";
import {
  findLiveServer,
  generateAdminToken,
  removeServerFile,
  resolveAdminToken,
  serverFilePath,
  writeServerFile,
} from "../../src/accounts/local-server.js";

let dataDir: string;
beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "switchyard-server-file-"));
});
afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  assert.ok(child.pid);
  return child.pid;
}

test("the server file is private and finds this live process", () => {
  const adminToken = generateAdminToken();
  writeServerFile(dataDir, { url: "http://127.0.0.1:1234", adminToken });
  assert.equal(statSync(serverFilePath(dataDir)).mode & 0o777, 0o600);
  assert.deepEqual(findLiveServer(dataDir), { url: "http://127.0.0.1:1234", adminToken });
  removeServerFile(dataDir);
  assert.equal(existsSync(serverFilePath(dataDir)), false);
  assert.equal(findLiveServer(dataDir), null);
});

test("a stale or corrupt file is ignored", () => {
  writeFileSync(serverFilePath(dataDir), JSON.stringify({ pid: deadPid(), url: "http://127.0.0.1:1", adminToken: "t" }));
  assert.equal(findLiveServer(dataDir), null);
  writeFileSync(serverFilePath(dataDir), "{not json");
  assert.equal(findLiveServer(dataDir), null);
  writeFileSync(serverFilePath(dataDir), JSON.stringify({ pid: 0, url: "http://127.0.0.1:1", adminToken: "t" }));
  assert.equal(findLiveServer(dataDir), null);
});

test("removeServerFile leaves another live process's file alone", () => {
  const otherPid = process.ppid; // alive for the whole test
  writeFileSync(serverFilePath(dataDir), JSON.stringify({ pid: otherPid, url: "http://127.0.0.1:1", adminToken: "t" }));
  removeServerFile(dataDir);
  assert.equal(existsSync(serverFilePath(dataDir)), true);
});

test("admin tokens are random; SWITCHYARD_ADMIN_KEY wins when set", () => {
  assert.notEqual(generateAdminToken(), generateAdminToken());
  assert.ok(generateAdminToken().length >= 40);
  assert.equal(resolveAdminToken({ SWITCHYARD_ADMIN_KEY: "operator-secret" }), "operator-secret");
  assert.match(resolveAdminToken({}), /^sy-admin-/);
  assert.match(resolveAdminToken({ SWITCHYARD_ADMIN_KEY: " " }), /^sy-admin-/);
});
