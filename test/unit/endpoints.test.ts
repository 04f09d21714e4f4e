/**
 * The non-generation endpoints as plain functions (api/<resource>/endpoints.ts): `run(caller,
 * input)` with real services on an in-process database, no Fastify, socket or model. The HTTP
 * side (auth, parsing, the error shape) is tested through the server in test/integration/.
 */
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { after, before, describe, test } from "node:test";
import { createAccountKeys } from "../../src/accounts/account-keys.js";
import { createKey } from "../../src/accounts/key-store.js";
import { authenticate } from "../../src/accounts/principals.js";
import { createCompletionStore } from "../../src/api/chat/completion-store.js";
import type { Endpoint, EndpointAnswer } from "../../src/api/endpoint.js";
import { createEndpoints, ENDPOINT_SPECS } from "../../src/api/registry.js";
import { createUsageReports } from "../../src/billing/usage-reports.js";
import { loadCatalog } from "../../src/catalog/load.js";
import { ServiceError } from "../../src/errors.js";
import type { Principal } from "../../src/protocol/principal.js";
import { createModelRegistry } from "../../src/serving/model-registry.js";
import type { Database } from "../../src/storage/database.js";
import { openDatabase } from "../../src/storage/open.js";
import { migratedDataDir } from "../helpers/databases.js";

/** The answer's JSON, whichever way the endpoint wrote it. */
const answerValue = (answer: EndpointAnswer): any => {
  if (answer.type === "json-text") return JSON.parse(answer.text);
  assert.equal(answer.type, "json");
  return (answer as { value: unknown }).value;
};
const byId = (endpoints: Endpoint[] | undefined, id: string): Endpoint => {
  const found = endpoints?.find((e) => e.id === id);
  assert.ok(found, `no endpoint ${id}`);
  return found;
};
const refusal = (status: number, code: string) => (error: unknown) =>
  error instanceof ServiceError && error.status === status && error.code === code;

describe("endpoints as plain functions", () => {
  let dataDir: string;
  let db: Database;
  let endpoints: ReturnType<typeof createEndpoints>;
  let manager: Principal;
  let plain: Principal;
  let other: Principal;

  before(async () => {
    dataDir = await migratedDataDir("switchyard-endpoints-");
    db = await openDatabase({ dataDir });
    endpoints = createEndpoints({
      registry: createModelRegistry(await loadCatalog({})),
      usage: createUsageReports(db),
      keys: createAccountKeys(db),
      completions: createCompletionStore(db, { perAccount: 100, retentionDays: 30 }),
    });
    const principal = async (key: { key: string }) => (await authenticate(db, key.key))!;
    manager = await principal(await createKey(db, { account: "acme", name: "ops", manageKeys: true }));
    plain = await principal(await createKey(db, { account: "acme", name: "app" }));
    other = await principal(await createKey(db, { account: "globex", name: "theirs", manageKeys: true }));
  });
  after(async () => {
    await db.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test("every declared resource is served when its service is given, and tokens are not without one", () => {
    assert.equal(endpoints.tokens, undefined);
    for (const resource of ["storedCompletions", "models", "usage", "keys"] as const) {
      assert.deepEqual(
        endpoints[resource]?.map((e) => e.id),
        ENDPOINT_SPECS[resource].map((s) => s.id),
        resource,
      );
    }
  });

  test("keys: the manage-keys right is checked before anything runs; a manager creates, lists and revokes its own account's keys", async () => {
    const [list, create, revoke] = ["listAccountKeys", "createAccountKey", "revokeAccountKey"].map((id) => byId(endpoints.keys, id));
    for (const endpoint of [list!, create!, revoke!]) {
      assert.throws(() => endpoint.authorize?.(plain), refusal(403, "missing_manage_keys_right"), endpoint.id);
      assert.doesNotThrow(() => endpoint.authorize?.(manager));
    }
    const created = await create!.run(manager, { params: {}, query: {}, body: { name: "made" } });
    assert.equal(created.status, 201);
    const { id } = answerValue(created);
    assert.ok(answerValue(await list!.run(manager, { params: {}, query: {}, body: undefined })).data.some((k: any) => k.id === id));
    assert.ok(!answerValue(await list!.run(other, { params: {}, query: {}, body: undefined })).data.some((k: any) => k.id === id));
    await assert.rejects(
      revoke!.run(other, { params: { id }, query: {}, body: undefined }),
      (e) => e instanceof ServiceError && e.status === 404,
    );
    assert.equal(answerValue(await revoke!.run(manager, { params: { id }, query: {}, body: undefined })).id, id);
  });

  test("models: the list is a list envelope; an unknown model is a 404 naming it; a catalog model cannot be deleted", async () => {
    const [list, retrieve, remove] = ["listModels", "retrieveModel", "deleteModel"].map((id) => byId(endpoints.models, id));
    const listed = answerValue(await list!.run(plain, { params: {}, query: {}, body: undefined }));
    assert.equal(listed.object, "list");
    assert.ok(listed.data.length > 0);
    const model = listed.data[0].id as string;
    assert.equal(answerValue(await retrieve!.run(plain, { params: { model }, query: {}, body: undefined })).id, model);
    await assert.rejects(
      retrieve!.run(plain, { params: { model: "no/such" }, query: {}, body: undefined }),
      refusal(404, "model_not_found"),
    );
    await assert.rejects(remove!.run(plain, { params: { model }, query: {}, body: undefined }), refusal(403, "model_not_deletable"));
  });

  test("usage: the caller's own account, with its query parsed by the declaration", async () => {
    const get = byId(endpoints.usage, "getUsage");
    assert.throws(
      () => get.parseQuery!({ group_by: "week" }),
      (e) => e instanceof ServiceError && e.status === 400,
    );
    const query = get.parseQuery!({ start: "2025-01-01", group_by: "model" });
    const answer = await get.run(plain, { params: {}, query, body: undefined });
    assert.equal(answer.type, "json-text");
    assert.equal(typeof answerValue(answer), "object");
  });

  test("stored completions: list, get, update, delete and messages, each the caller's account's only", async () => {
    const store = createCompletionStore(db, { perAccount: 100, retentionDays: 30 });
    const body = '{"id":"chatcmpl-1","object":"chat.completion","usage":{"estimated_cost":0.000000123456789012345}}';
    await store.save(plain.accountId, {
      id: "chatcmpl-1",
      model: "m",
      metadata: { team: "a" },
      messages: [{ role: "user", content: "hi" }],
      body,
    });
    const call = (id: string, caller: Principal, input: Partial<{ params: any; query: any; body: any }>) =>
      byId(endpoints.storedCompletions, id).run(caller, { params: {}, query: {}, body: undefined, ...input });
    const list = byId(endpoints.storedCompletions, "listChatCompletions");
    const query = list.parseQuery!({ "metadata[team]": "a" });
    const listed = await call("listChatCompletions", plain, { query });
    // The stored text goes out as it was kept: the cost keeps every digit.
    assert.match((listed as { text: string }).text, /"estimated_cost":0\.000000123456789012345/);
    assert.deepEqual(
      answerValue(listed).data.map((c: any) => c.id),
      ["chatcmpl-1"],
    );
    assert.deepEqual(answerValue(await call("listChatCompletions", other, { query })).data, []);
    assert.throws(() => list.parseQuery!({ "metadata[team]": ["a", "b"] }), refusal(400, "invalid_value"));
    await assert.rejects(
      call("getChatCompletion", other, { params: { id: "chatcmpl-1" } }),
      (e) => e instanceof ServiceError && e.status === 404,
    );
    const updated = await call("updateChatCompletion", plain, { params: { id: "chatcmpl-1" }, body: { metadata: { team: "b" } } });
    assert.deepEqual(answerValue(updated).metadata, { team: "b" });
    const messages = answerValue(
      await call("listChatCompletionMessages", plain, { params: { id: "chatcmpl-1" }, query: { limit: 20, order: "asc" } }),
    );
    assert.deepEqual(
      messages.data.map((m: any) => [m.id, m.content]),
      [["chatcmpl-1-0", "hi"]],
    );
    assert.equal(answerValue(await call("deleteChatCompletion", plain, { params: { id: "chatcmpl-1" } })).deleted, true);
    await assert.rejects(
      call("getChatCompletion", plain, { params: { id: "chatcmpl-1" } }),
      (e) => e instanceof ServiceError && e.status === 404,
    );
  });
});
