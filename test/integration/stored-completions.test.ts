import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { API_PREFIXES } from "../../src/http/api-paths.js";
import { SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/** A stored completion carries its metadata, as OpenAI's does; the SDK's ChatCompletion type leaves it out. */
const metadataOf = (completion: object) => (completion as { metadata?: Record<string, string> }).metadata;

describe("stored chat completions (store: true), through the official client under every API prefix", () => {
  let server: SharedServer;
  let strangerKey: string;
  before(async () => {
    server = await sharedServer();
    strangerKey = (await server.newKey("stranger")).key;
  });
  after(async () => {
    await server?.stop();
  });
  const clientAt = (prefix: string, key = server.key) =>
    new OpenAI({ apiKey: key, baseURL: `${server.url}${prefix}`, timeout: 180_000, maxRetries: 0 });

  test("list filters with a NUL byte (cursor, model, metadata key or value) are a 400 naming the parameter, not a storage error", async () => {
    const cases: Array<[string, string]> = [
      ["after=%00", "after"],
      ["model=%00", "model"],
      ["metadata%5Ba%5D=%00", "metadata.a"],
      ["metadata%5B%00%5D=a", "metadata.\u0000"],
    ];
    for (const [query, param] of cases) {
      const response = await fetch(`${server.url}/v1/chat/completions?${query}`, { headers: { authorization: `Bearer ${server.key}` } });
      assert.equal(response.status, 400, query);
      assert.equal((await response.json()).error.param, param, query);
    }
    const pages = await fetch(`${server.url}/v1/responses/resp_x/input_items?after=%00`, {
      headers: { authorization: `Bearer ${server.key}` },
    });
    assert.ok([400, 404].includes(pages.status), "a stored response's item cursor is refused too");
  });

  for (const prefix of API_PREFIXES) {
    test(`${prefix}: create, retrieve, list, update, messages, delete`, async () => {
      const client = clientAt(prefix);
      const stranger = clientAt(prefix, strangerKey);
      const tag = prefix.replaceAll("/", "-");
      const made = await client.chat.completions.create({
        model: SMOLLM2,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Name a colour." },
        ],
        max_tokens: 8,
        store: true,
        metadata: { suite: tag, kind: "plain" },
      });
      const streamed = await client.chat.completions.create({
        model: SMOLLM2,
        messages: [{ role: "user", content: [{ type: "text", text: "Count to three." }] }],
        max_tokens: 8,
        store: true,
        stream: true,
        metadata: { suite: tag, kind: "stream" },
      });
      let streamedId = "";
      let streamedText = "";
      for await (const chunk of streamed) {
        streamedId = chunk.id;
        streamedText += chunk.choices[0]?.delta.content ?? "";
      }
      const unstored = await client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });

      const got = await client.chat.completions.retrieve(made.id);
      assert.equal(got.id, made.id);
      assert.deepEqual(got.choices, made.choices);
      assert.deepEqual(got.usage, made.usage, "the usage (its exact cost too) is as it was sent");
      assert.deepEqual(metadataOf(got), { suite: tag, kind: "plain" });
      const fromStream = await client.chat.completions.retrieve(streamedId);
      assert.equal(fromStream.choices[0]!.message.content, streamedText, "a streamed completion is stored whole");
      await assert.rejects(client.chat.completions.retrieve(unstored.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
      await assert.rejects(stranger.chat.completions.retrieve(made.id), (e: unknown) => e instanceof OpenAI.NotFoundError);

      const listed = await client.chat.completions.list({ metadata: { suite: tag }, limit: 1 });
      assert.deepEqual(
        listed.data.map((c) => c.id),
        [made.id],
        "oldest first by default; a page of one",
      );
      assert.equal(listed.has_more, true);
      const all: string[] = [];
      for await (const c of client.chat.completions.list({ metadata: { suite: tag }, limit: 1 })) all.push(c.id);
      assert.deepEqual(all, [made.id, streamedId], "the SDK pages through with after");
      const newest = await client.chat.completions.list({ metadata: { suite: tag, kind: "stream" }, order: "desc", model: SMOLLM2 });
      assert.deepEqual(
        newest.data.map((c) => c.id),
        [streamedId],
      );
      assert.equal((await client.chat.completions.list({ metadata: { suite: tag }, model: "no/such-model" })).data.length, 0);
      assert.equal((await stranger.chat.completions.list({ metadata: { suite: tag } })).data.length, 0);

      const updated = await client.chat.completions.update(made.id, { metadata: { suite: tag, reviewed: "yes" } });
      assert.deepEqual(metadataOf(updated), { suite: tag, reviewed: "yes" });
      await assert.rejects(
        stranger.chat.completions.update(made.id, { metadata: { x: "y" } }),
        (e: unknown) => e instanceof OpenAI.NotFoundError,
      );
      await assert.rejects(
        client.chat.completions.update(made.id, { metadata: { ["k".repeat(65)]: "v" } }),
        (e: unknown) => e instanceof OpenAI.BadRequestError,
      );

      const messages = await client.chat.completions.messages.list(made.id);
      assert.deepEqual(
        messages.data.map((m) => [m.id, m.role, m.content]),
        [
          [`${made.id}-0`, "system", "Be brief."],
          [`${made.id}-1`, "user", "Name a colour."],
        ],
      );
      const second = await client.chat.completions.messages.list(made.id, { after: `${made.id}-0`, limit: 5 });
      assert.deepEqual(
        second.data.map((m) => m.id),
        [`${made.id}-1`],
      );
      const parts = await client.chat.completions.messages.list(streamedId);
      assert.equal(parts.data[0]!.content, "Count to three.");
      assert.deepEqual(parts.data[0]!.content_parts, [{ type: "text", text: "Count to three." }]);

      await assert.rejects(stranger.chat.completions.delete(made.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
      assert.deepEqual(await client.chat.completions.delete(made.id), { id: made.id, object: "chat.completion.deleted", deleted: true });
      await assert.rejects(client.chat.completions.retrieve(made.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
      await assert.rejects(client.chat.completions.messages.list(made.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
    });
  }
});
