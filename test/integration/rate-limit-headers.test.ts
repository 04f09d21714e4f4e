import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/** The six headers, as the official client exposes them. */
const limitsOf = (headers: Headers) =>
  Object.fromEntries(
    ["limit", "remaining", "reset"].flatMap((part) =>
      ["requests", "tokens"].map((kind) => [`${part}-${kind}`, headers.get(`x-ratelimit-${part}-${kind}`)]),
    ),
  );

describe("x-ratelimit headers on every response to a key with a limit, through the official client", () => {
  let server: SharedServer;
  let limited: OpenAI;
  let unlimited: OpenAI;
  before(async () => {
    server = await sharedServer();
    limited = new OpenAI({
      apiKey: (await server.newKey("paced", { rpm_limit: 3, tpm_limit: 100_000 })).key,
      baseURL: server.baseURL,
      timeout: 180_000,
      maxRetries: 0,
    });
    unlimited = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  test("a completion, a stream, a list, and the 429 once the minute's requests are spent", async () => {
    const { response: first } = await limited.chat.completions
      .create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 })
      .withResponse();
    const firstLimits = limitsOf(first.headers);
    assert.equal(firstLimits["limit-requests"], "3");
    assert.equal(firstLimits["remaining-requests"], "2");
    assert.match(firstLimits["reset-requests"]!, /^(\d+s|1m0s)$/);
    assert.equal(firstLimits["limit-tokens"], "100000");
    assert.ok(Number(firstLimits["remaining-tokens"]) < 100_000, "the request's tokens are counted");

    const { data: stream, response: streamed } = await limited.chat.completions
      .create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, stream: true })
      .withResponse();
    for await (const _chunk of stream) void _chunk;
    assert.equal(streamed.headers.get("content-type"), "text/event-stream; charset=utf-8");
    assert.equal(limitsOf(streamed.headers)["remaining-requests"], "1", "a stream carries them in its head");

    const { response: listed } = await limited.models.list().withResponse();
    assert.equal(limitsOf(listed.headers)["remaining-requests"], "1", "other routes read the window, taking nothing");

    await limited.responses.create({ model: SMOLLM2, input: "Hi", max_output_tokens: 4 });
    const refusal = await limited.chat.completions
      .create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 })
      .then(
        () => assert.fail("expected a 429"),
        (error: unknown) => error,
      );
    assert.ok(refusal instanceof OpenAI.RateLimitError);
    const refused = limitsOf(refusal.headers!);
    assert.equal(refused["limit-requests"], "3");
    assert.equal(refused["remaining-requests"], "0");
    assert.match(refused["reset-requests"]!, /^(\d+s|1m0s)$/);
    assert.ok(Number(refusal.headers!.get("retry-after")) >= 1);

    const bad = await limited.chat.completions.create({ model: SMOLLM2, messages: [], max_tokens: 4 }).catch((error: unknown) => error);
    assert.ok(bad instanceof OpenAI.APIError);
    assert.equal(limitsOf(bad.headers!)["remaining-requests"], "0", "an error response carries them too");
  });

  test("a key without limits gets none", async () => {
    const { response } = await unlimited.chat.completions
      .create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 })
      .withResponse();
    assert.deepEqual(Object.values(limitsOf(response.headers)), [null, null, null, null, null, null]);
  });
});
