/**
 * The stored-response endpoints as plain functions (api/responses/endpoints.ts): `run(caller, input)`
 * on the real response store over an in-process database; a background response's status and events
 * played by a recording fake of BackgroundResponses. No Fastify, socket or model: how the events are
 * written as SSE is test/integration/background-responses.test.ts's business.
 */
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { after, before, describe, test } from "node:test";
import { createKey } from "../../src/accounts/key-store.js";
import { authenticate } from "../../src/accounts/principals.js";
import type { Endpoint, EndpointAnswer, EndpointInput } from "../../src/api/endpoint.js";
import type { BackgroundResponses } from "../../src/api/responses/background.js";
import { storedResponseEndpoints } from "../../src/api/responses/endpoints.js";
import { createResponseStore, type ResponseStore } from "../../src/api/responses/response-store.js";
import { ServiceError } from "../../src/errors.js";
import type { Principal } from "../../src/protocol/principal.js";
import type { Database } from "../../src/storage/database.js";
import { openDatabase } from "../../src/storage/open.js";
import { migratedDataDir } from "../helpers/databases.js";

const refusal = (status: number, code: string) => (error: unknown) =>
  error instanceof ServiceError && error.status === status && error.code === code;
const textOf = (answer: EndpointAnswer): string => {
  assert.equal(answer.type, "json-text");
  return (answer as { text: string }).text;
};
const jsonOf = (answer: EndpointAnswer): any => {
  assert.equal(answer.type, "json");
  return (answer as { value: unknown }).value;
};

const BODY = '{"id":"resp_1","object":"response","usage":{"estimated_cost":0.000000123456789012345}}';
const ITEMS = [1, 2, 3].map((n) => ({ id: `msg_${n}`, type: "message", role: "user", content: `m${n}` }));

/** Background responses as the endpoints see them: a status kept beside the store, events to follow, what was asked recorded. */
function fakeBackground(store: ResponseStore) {
  const status = new Map<string, string>();
  const asked: string[] = [];
  const background: BackgroundResponses = {
    create: () => Promise.reject(new Error("not used")),
    async *follow(accountId, id, after, signal) {
      asked.push(`follow ${id} of ${accountId} after ${after}`);
      for (let n = after + 1; n < 3 && !signal.aborted; n++) yield { event: "response.in_progress", data: { sequence_number: n } };
    },
    async cancel(accountId, id) {
      asked.push(`cancel ${id} of ${accountId}`);
      status.set(id, "cancelled");
    },
    stop: (accountId, id) => void asked.push(`stop ${id} of ${accountId}`),
  };
  const withStatus: ResponseStore = {
    ...store,
    get: async (accountId, id) => {
      const found = await store.get(accountId, id);
      return found && { ...found, status: status.get(id) ?? null };
    },
  };
  return { background, store: withStatus, status, asked };
}

describe("stored responses as plain functions", () => {
  let dataDir: string;
  let db: Database;
  let mine: Principal;
  let theirs: Principal;
  let fake: ReturnType<typeof fakeBackground>;
  let endpoints: Map<string, Endpoint>;
  const call = (id: string, caller: Principal, input: Partial<EndpointInput<any, any, any>> = {}) =>
    endpoints.get(id)!.run(caller, { params: {}, query: {}, body: undefined, ...input });
  const query = (id: string, raw: Record<string, unknown>) => endpoints.get(id)!.parseQuery!(raw);

  before(async () => {
    dataDir = await migratedDataDir("switchyard-api-responses-");
    db = await openDatabase({ dataDir });
    const store = createResponseStore(db, { perAccount: 100, retentionDays: 30 });
    fake = fakeBackground(store);
    endpoints = new Map(storedResponseEndpoints(fake.store, fake.background).map((e) => [e.id, e]));
    const principal = async (key: { key: string }) => (await authenticate(db, key.key))!;
    mine = await principal(await createKey(db, { account: "resp-a", name: "app" }));
    theirs = await principal(await createKey(db, { account: "resp-b", name: "app" }));
    for (const id of ["resp_1", "resp_bg"]) await store.save(mine.accountId, id, { conversation: [], body: BODY, inputItems: ITEMS });
    fake.status.set("resp_bg", "in_progress");
  });
  after(async () => {
    await db.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test("retrieve: the stored text as it was sent (exact decimals); another account's is a 404; a foreground one cannot be streamed", async () => {
    const plain = query("getResponse", {});
    assert.equal(textOf(await call("getResponse", mine, { params: { id: "resp_1" }, query: plain })), BODY);
    await assert.rejects(call("getResponse", theirs, { params: { id: "resp_1" }, query: plain }), refusal(404, "not_found"));
    const streamed = query("getResponse", { stream: "true" });
    await assert.rejects(call("getResponse", mine, { params: { id: "resp_1" }, query: streamed }), refusal(400, "stream_not_supported"));
  });

  test("retrieve with stream: the query is parsed by the declaration, and the answer is the events after starting_after", async () => {
    assert.deepEqual(query("getResponse", { stream: "1", starting_after: "0" }), { stream: true, startingAfter: 0 });
    // Without stream, starting_after means nothing and is not read.
    assert.deepEqual(query("getResponse", { starting_after: "x" }), { stream: false, startingAfter: -1 });
    for (const bad of ["x", "-2", String(2 ** 31)])
      assert.throws(() => query("getResponse", { stream: "true", starting_after: bad }), refusal(400, "invalid_value"), bad);
    const answer = await call("getResponse", mine, {
      params: { id: "resp_bg" },
      query: query("getResponse", { stream: "true", starting_after: "0" }),
    });
    assert.equal(answer.type, "events");
    if (answer.type !== "events") return;
    const seen = [];
    for await (const chunk of answer.follow(new AbortController().signal)) seen.push(chunk);
    assert.deepEqual(seen, [
      { event: "response.in_progress", data: { sequence_number: 1 } },
      { event: "response.in_progress", data: { sequence_number: 2 } },
    ]);
    assert.ok(fake.asked.includes(`follow resp_bg of ${mine.accountId} after 0`));
  });

  test("input items: newest first by default, paged with after and limit; an unknown cursor is a 400", async () => {
    const first = jsonOf(await call("listResponseInputItems", mine, { params: { id: "resp_1" }, query: { limit: 2, order: "desc" } }));
    assert.deepEqual([first.data.map((i: any) => i.id), first.has_more], [["msg_3", "msg_2"], true]);
    const rest = jsonOf(
      await call("listResponseInputItems", mine, { params: { id: "resp_1" }, query: { limit: 2, order: "desc", after: "msg_2" } }),
    );
    assert.deepEqual(
      rest.data.map((i: any) => i.id),
      ["msg_1"],
    );
    await assert.rejects(
      call("listResponseInputItems", mine, { params: { id: "resp_1" }, query: { limit: 2, order: "desc", after: "msg_9" } }),
      (e) => e instanceof ServiceError && e.status === 400,
    );
    await assert.rejects(
      call("listResponseInputItems", theirs, { params: { id: "resp_1" }, query: { limit: 2, order: "desc" } }),
      refusal(404, "not_found"),
    );
  });

  test("cancel: only a background response, once; delete stops it first; another account's is a 404", async () => {
    await assert.rejects(call("cancelResponse", mine, { params: { id: "resp_1" } }), refusal(400, "not_cancellable"));
    await assert.rejects(call("cancelResponse", theirs, { params: { id: "resp_bg" } }), refusal(404, "not_found"));
    assert.equal(textOf(await call("cancelResponse", mine, { params: { id: "resp_bg" } })), BODY);
    assert.equal(fake.status.get("resp_bg"), "cancelled");
    // Ended: a second cancel changes nothing and asks the background runner nothing.
    await call("cancelResponse", mine, { params: { id: "resp_bg" } });
    assert.deepEqual(
      fake.asked.filter((a) => a.startsWith("cancel")),
      [`cancel resp_bg of ${mine.accountId}`],
    );
    await assert.rejects(call("deleteResponse", theirs, { params: { id: "resp_bg" } }), refusal(404, "not_found"));
    assert.deepEqual(jsonOf(await call("deleteResponse", mine, { params: { id: "resp_bg" } })), {
      id: "resp_bg",
      object: "response",
      deleted: true,
    });
    assert.ok(fake.asked.includes(`stop resp_bg of ${mine.accountId}`));
    await assert.rejects(
      call("getResponse", mine, { params: { id: "resp_bg" }, query: query("getResponse", {}) }),
      refusal(404, "not_found"),
    );
  });
});
