import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { cli, postChat, readSse } from "../helpers/server.js";
import { ask } from "../helpers/requests.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";
import { smolStandardUnits } from "../helpers/usage.js";

describe("every request leaves exactly one ledger row, and the bill matches what the client got", () => {
  let server: SharedServer;
  const received = { completion: 0, prompt: 0, requests: 0, units: 0 };
  before(async () => {
    server = await sharedServer();
  });
  after(async () => {
    await server?.stop();
  });

  const usage = async (query = "") => {
    const response = await fetch(`${server.url}/v1/usage${query}`, { headers: { authorization: `Bearer ${server.key}` } });
    assert.equal(response.status, 200);
    const raw = await response.text();
    return { body: JSON.parse(raw), raw };
  };

  test("finished and max_tokens-stopped requests are billed what their usage said", async () => {
    for (const body of [ask("Say hello.", { max_tokens: 30 }), ask("Write a long poem.", { max_tokens: 6 })]) {
      const reply = await (await postChat(server, body)).json();
      received.prompt += reply.usage.prompt_tokens;
      received.completion += reply.usage.completion_tokens;
      received.units += smolStandardUnits(reply.usage);
      received.requests++;
    }
    const events = await readSse(
      await postChat(server, ask("Count to five.", { max_tokens: 20, stream: true, stream_options: { include_usage: true } })),
    );
    const streamed = JSON.parse(events.at(-2)!).usage;
    received.prompt += streamed.prompt_tokens;
    received.completion += streamed.completion_tokens;
    received.units += smolStandardUnits(streamed);
    received.requests++;
    const { body } = await usage();
    assert.equal(body.totals.requests, 3);
    assert.equal(body.totals.by_status.completed, 3);
    assert.equal(body.totals.completion_tokens, received.completion);
    assert.equal(body.totals.prompt_tokens, received.prompt);
    assert.equal(body.totals.cost_usd, received.units / 1e8);
  });

  test("rejected requests are recorded at no charge", async () => {
    assert.equal((await postChat(server, ask("hi", { model: "nobody/nothing" }))).status, 404);
    assert.equal((await postChat(server, ask("hi", { max_tokens: 9000 }))).status, 400);
    const { body } = await usage();
    assert.equal(body.totals.requests, 5);
    assert.equal(body.totals.by_status.rejected, 2);
    assert.equal(body.totals.completion_tokens, received.completion, "rejections add no tokens");
  });

  test("a client that disconnects mid-stream is billed for what was generated, once", async () => {
    const controller = new AbortController();
    const response = await fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
      body: JSON.stringify(ask("Write a very long essay about rivers.", { stream: true, max_tokens: 500 })),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    let chunks = 0;
    while (chunks < 6) {
      const { value } = await reader.read();
      chunks += (new TextDecoder().decode(value).match(/"content":"/g) ?? []).length;
    }
    controller.abort();
    let cancelled = 0;
    let body: { totals: { by_status: Record<string, number>; completion_tokens: number; requests: number } } = {
      totals: { by_status: {}, completion_tokens: 0, requests: 0 },
    };
    for (let i = 0; i < 50 && cancelled === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      body = (await usage()).body;
      cancelled = body.totals.by_status.cancelled ?? 0;
    }
    assert.equal(cancelled, 1);
    assert.equal(body.totals.requests, 6);
    const billed = body.totals.completion_tokens - received.completion;
    assert.ok(billed >= chunks - 1 && billed < 500, `billed ${billed} generated tokens for ${chunks} content chunks received`);
  });

  test("grouping by model and the CLI report agree with the API, exactly", async () => {
    const { body, raw } = await usage("?group_by=model");
    assert.equal(body.data.length, 2, "the real model and the unknown one that was rejected");
    assert.doesNotMatch(raw, /\de-\d/);
    const report = JSON.parse(cli(["usage", "--account", server.account, "--json", "--data-dir", server.dataDir]));
    assert.equal(report.totals.requests, body.totals.requests);
    assert.equal(report.totals.cost_usd, body.totals.cost_usd);
  });

  test("the row is written beside the prompt's evaluation, yet committed before the first token reaches the client", async () => {
    // A key without a budget launches while its row is written (admission.ts); output waits for the row.
    const before = (await usage()).body.totals.completion_tokens as number;
    const response = await postChat(server, ask("Write a long story about a lighthouse.", { stream: true, max_tokens: 200 }));
    const reader = response.body!.getReader();
    let text = "";
    while (!/"content":"[^"]/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
    const { body } = await usage();
    assert.equal(body.totals.by_status.in_flight, 1, JSON.stringify(body.totals));
    assert.ok(body.totals.completion_tokens - before >= 1, "the row already covers the tokens being delivered");
    await reader.cancel();
  });
});
