import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { serverDatabaseReader } from "../helpers/databases.js";
import { adminKey, createKey, SMOLLM2, startServer, waitFor, type RunningServer } from "../helpers/server.js";

/**
 * Issue 54: background responses as OpenAI documents them, through the official client on the real
 * SmolLM2: created `queued`, polled to the end, streamed and resumed with `starting_after`,
 * cancelled (twice), refused to another account, capped per account, and failed (billed once)
 * after a kill -9.
 */
const LONG = { model: SMOLLM2, input: "Count from 1 to 2000, one number per line.", temperature: 0, max_output_tokens: 1500 };
const SHORT = { model: SMOLLM2, input: "Name three colours.", max_output_tokens: 20 };
const FINISHED = ["completed", "incomplete", "failed", "cancelled"];

const clientFor = (server: RunningServer, apiKey = server.key) =>
  new OpenAI({ apiKey, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });

async function finished(client: OpenAI, id: string) {
  return waitFor(async () => {
    const response = await client.responses.retrieve(id);
    return FINISHED.includes(response.status!) ? response : undefined;
  }, 180_000);
}

/** Reads events until `until` says stop (then drops the connection) or the stream ends. */
async function collect(
  stream: AsyncIterable<ResponseStreamEvent> & { controller: AbortController },
  until = (_: ResponseStreamEvent[]) => false,
) {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (until(events)) {
      stream.controller.abort();
      break;
    }
  }
  return events;
}

const deltas = (events: ResponseStreamEvent[]) => events.filter((e) => e.type === "response.output_text.delta").length;
const numbered = (events: ResponseStreamEvent[], from: number) =>
  events.forEach((e, i) => assert.equal(e.sequence_number, from + i, e.type));
const notFound = (error: unknown) => error instanceof OpenAI.NotFoundError;
/** The response object as the server sent it (the client's retrieve adds `output_text`; its cancel does not). */
const asSent = (response: OpenAI.Responses.Response) => ({ ...response, output_text: undefined });

/**
 * One server for the file: the kill -9 test, last, kills it and restarts it on its data dir (it
 * once had a server and a data dir of its own).
 */
let server: RunningServer;
let dataDir = "";
const ENV = { SWITCHYARD_BACKGROUND_RESPONSES_PER_ACCOUNT: "2" };
before(async () => {
  server = await startServer({ env: ENV });
  dataDir = server.dataDir;
});
after(async () => {
  await server?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("background responses through the official client", () => {
  let client: OpenAI;
  let stranger: OpenAI;
  before(async () => {
    client = clientFor(server);
    stranger = clientFor(server, await adminKey(server, "stranger"));
  });

  test("create answers at once, queued; polling sees it finish with its answer and usage; a cancel then changes nothing", async () => {
    const { data: created, response } = await client.responses.create({ ...SHORT, background: true }).withResponse();
    assert.equal(created.status, "queued");
    assert.equal(created.background, true);
    assert.deepEqual(created.output, []);
    assert.equal(response.headers.get("x-request-id"), created.id);
    const done = await finished(client, created.id);
    assert.ok(["completed", "incomplete"].includes(done.status!), done.status!);
    assert.ok(done.output_text.trim().length > 0);
    assert.ok(done.usage!.output_tokens >= 1 && done.usage!.output_tokens <= 20);
    const again = await client.responses.cancel(created.id);
    assert.equal(again.status, done.status);
    assert.deepEqual(again.usage, done.usage);
  });

  test("stream: numbered events from queued to the end; starting_after replays the rest exactly", async () => {
    const events = await collect(await client.responses.create({ ...SHORT, background: true, stream: true }));
    numbered(events, 0);
    assert.deepEqual(
      events.slice(0, 3).map((e) => e.type),
      ["response.created", "response.queued", "response.in_progress"],
    );
    assert.ok(["response.completed", "response.incomplete"].includes(events.at(-1)!.type));
    const id = (events[0] as { response: { id: string } }).response.id;
    const resumed = await collect(await client.responses.retrieve(id, { stream: true, starting_after: 3 }));
    assert.deepEqual(resumed, events.slice(4));
    assert.deepEqual(await collect(await client.responses.retrieve(id, { stream: true })), events);
  });

  test("the client drops the stream; the response runs on; resuming follows it live to the end", async () => {
    const first = await collect(
      await client.responses.create({ ...LONG, max_output_tokens: 200, background: true, stream: true }),
      (e) => deltas(e) >= 2,
    );
    const id = (first[0] as { response: { id: string } }).response.id;
    const last = first.at(-1)!.sequence_number;
    const rest = await collect(await client.responses.retrieve(id, { stream: true, starting_after: last }));
    numbered(rest, last + 1);
    const end = rest.at(-1)!;
    assert.ok(end.type === "response.completed" || end.type === "response.incomplete", end.type);
    const text = [...first, ...rest].flatMap((e) => (e.type === "response.output_text.delta" ? [e.delta] : [])).join("");
    const stored = await client.responses.retrieve(id);
    assert.equal(stored.output_text, text);
    assert.equal(stored.usage!.output_tokens, end.response.usage!.output_tokens);
  });

  test("cancel: a running response ends cancelled with what it generated; a second cancel answers the same", async () => {
    const stream = await client.responses.create({ ...LONG, background: true, stream: true });
    const seen = await collect(stream, (e) => deltas(e) >= 3);
    const id = (seen[0] as { response: { id: string } }).response.id;
    const cancelled = await client.responses.cancel(id);
    assert.equal(cancelled.status, "cancelled");
    assert.ok(cancelled.usage!.output_tokens >= 3 && cancelled.usage!.output_tokens < 1500, String(cancelled.usage!.output_tokens));
    assert.deepEqual(await client.responses.cancel(id), cancelled);
    assert.deepEqual(asSent(await client.responses.retrieve(id)), asSent(cancelled));
    // The replay ends: nothing runs any more.
    const replay = await collect(await client.responses.retrieve(id, { stream: true }));
    numbered(replay, 0);
  });

  test("queued or running background responses are capped per account (429), and cancelling frees a place", async () => {
    const running = [
      await client.responses.create({ ...LONG, background: true }),
      await client.responses.create({ ...LONG, background: true }),
    ];
    const refused = await client.responses.create({ ...SHORT, background: true }).catch((e: unknown) => e);
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    assert.equal((refused.error as { code: string }).code, "too_many_background_responses");
    // Another account has its own places.
    const theirs = await stranger.responses.create({ ...SHORT, background: true });
    for (const r of running) assert.equal((await client.responses.cancel(r.id)).status, "cancelled");
    const admitted = await client.responses.create({ ...SHORT, background: true });
    assert.equal(admitted.status, "queued");
    await finished(client, admitted.id);
    await finished(stranger, theirs.id);
  });

  test("creates sent all at once cannot pass the cap together; a starting_after past 32 bits is a 400, not a failed query", async () => {
    const key = await adminKey(server, "burst");
    const burst = clientFor(server, key);
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => burst.responses.create({ ...LONG, background: true }).catch((e: unknown) => e)),
    );
    const created = answers.filter((a): a is OpenAI.Responses.Response => !(a instanceof Error));
    assert.ok(created.length <= 2, `${created.length} created past a cap of 2`);
    for (const refused of answers.filter((a) => a instanceof Error)) assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    const far = await fetch(`${server.baseURL}/responses/${created[0]!.id}?stream=true&starting_after=99999999999`, {
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(far.status, 400);
    assert.equal(((await far.json()) as { error: { param: string } }).error.param, "starting_after");
    for (const r of created) await burst.responses.cancel(r.id);
  });

  test("another account's key gets 404 for retrieve, stream, cancel, input items and delete", async () => {
    const created = await client.responses.create({ ...SHORT, background: true });
    await assert.rejects(stranger.responses.retrieve(created.id), notFound);
    await assert.rejects(
      (async () => collect(await stranger.responses.retrieve(created.id, { stream: true, starting_after: 0 })))(),
      notFound,
    );
    await assert.rejects(stranger.responses.cancel(created.id), notFound);
    await assert.rejects(stranger.responses.inputItems.list(created.id), notFound);
    await assert.rejects(stranger.responses.delete(created.id), notFound);
    const done = await finished(client, created.id);
    assert.ok(["completed", "incomplete"].includes(done.status!));
  });

  test("refusals: store false (400), stream or cancel of a foreground response (400), an unknown id (404, request id req_)", async () => {
    const stored = await client.responses.create({ ...SHORT, background: true, store: false }).catch((e: unknown) => e);
    assert.ok(stored instanceof OpenAI.BadRequestError);
    assert.equal(stored.param, "store");
    const foreground = await client.responses.create(SHORT);
    const streamed = await (async () => collect(await client.responses.retrieve(foreground.id, { stream: true })))().catch(
      (e: unknown) => e,
    );
    assert.ok(streamed instanceof OpenAI.BadRequestError);
    assert.equal(streamed.code, "stream_not_supported");
    const cancel = await client.responses.cancel(foreground.id).catch((e: unknown) => e);
    assert.ok(cancel instanceof OpenAI.BadRequestError);
    assert.equal(cancel.code, "not_cancellable");
    const unknown = await fetch(`${server.baseURL}/responses/resp_nope/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}` },
    });
    assert.equal(unknown.status, 404);
    assert.match(unknown.headers.get("x-request-id")!, /^req_/);
  });
});

describe("a background response running when its server is killed (kill -9), then a restart on the same data dir", () => {
  test("it reads failed with a clear error, its replay ends with response.failed, and its ledger row bills it once", async () => {
    const key = createKey(dataDir, "crash");
    let client = clientFor(server, key);
    const short = await client.responses.create({ ...SHORT, background: true });
    const shortDone = await finished(client, short.id);
    const seen = await collect(await client.responses.create({ ...LONG, background: true, stream: true }), (e) => deltas(e) >= 5);
    const id = (seen[0] as { response: { id: string } }).response.id;
    const exited = new Promise((resolve) => server.process.once("exit", resolve));
    server.process.kill("SIGKILL");
    await exited;

    server = await startServer({ dataDir, key, env: ENV });
    client = clientFor(server);
    const failed = await client.responses.retrieve(id);
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "server_error");
    assert.match(failed.error!.message, /server stopped while this background response was running/);
    const replay = await collect(await client.responses.retrieve(id, { stream: true }));
    assert.equal(replay.at(-1)!.type, "response.failed");
    numbered(replay, 0);
    assert.deepEqual(asSent(await client.responses.cancel(id)), asSent(failed), "a cancel of a failed one changes nothing");
    await server.stop();

    const rows = await serverDatabaseReader(
      dataDir,
      () => undefined,
    )((db) =>
      db.query<{ request_id: string; status: string; completion_tokens: number }>(
        "SELECT request_id, status, completion_tokens FROM usage_records WHERE request_id = ANY($1::text[])",
        [[id, short.id]],
      ),
    );
    assert.equal(rows.length, 2, "one ledger row each");
    const crashed = rows.find((r) => r.request_id === id)!;
    assert.equal(crashed.status, "interrupted");
    assert.ok(crashed.completion_tokens >= deltas(seen), `billed ${crashed.completion_tokens} >= ${deltas(seen)} seen`);
    const completed = rows.find((r) => r.request_id === short.id)!;
    assert.equal(completed.status, "completed");
    assert.equal(completed.completion_tokens, shortDone.usage!.output_tokens, "billed exactly what it generated");
  });
});
