import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { embeddingsOperation } from "../../src/api/embeddings/operation.js";
import type { Caller } from "../../src/serving/types.js";
import type { EmbeddingResult, EmbeddingService } from "../../src/serving/embedding-service.js";

/** The operation's JSON for these vectors, the service answering with them. */
async function rendered(vectors: Float32Array[], encoding_format?: "float" | "base64", json?: string[]): Promise<any> {
  const service: EmbeddingService = {
    embed: async (): Promise<EmbeddingResult> => ({
      model: "m",
      serviceTier: "default",
      vectors,
      json,
      promptTokens: 7,
      cost: "0.000000035",
    }),
  };
  const result = await embeddingsOperation(service).run(
    {} as Caller,
    { model: "m", input: "x", ...(encoding_format ? { encoding_format } : {}) },
    {
      signal: new AbortController().signal,
      requestId: "emb_test",
      logError: () => {},
    },
  );
  assert.equal(result.type, "json");
  return JSON.parse((result as { body: string }).body);
}

function randomVector(seed: number, length = 384): Float32Array {
  let state = seed;
  return Float32Array.from({ length }, () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return (state / 2 ** 31 - 0.5) * (state % 7 === 0 ? 1e-8 : 1);
  });
}

describe("the embeddings answer", () => {
  test("floats: each value reads back as the float32 the engine gave, in order, with the usage and its exact cost", async () => {
    const vectors = [randomVector(1), randomVector(2), Float32Array.from([0, -0, 1, -1, 1e-30, 3.4e38])];
    const body = await rendered(vectors);
    assert.equal(body.object, "list");
    assert.deepEqual(
      body.data.map((d: any) => [d.object, d.index]),
      [
        ["embedding", 0],
        ["embedding", 1],
        ["embedding", 2],
      ],
    );
    // At most nine significant digits (-0 as 0): what a client parses rounds to exactly each float32.
    body.data.forEach((d: any, i: number) =>
      assert.deepEqual(
        d.embedding.map((v: number) => Math.fround(v)),
        Array.from(vectors[i]!, (v) => (v === 0 ? 0 : v)),
      ),
    );
    assert.deepEqual(body.usage, { prompt_tokens: 7, total_tokens: 7, estimated_cost: 3.5e-8 });
    assert.equal(body.service_tier, "default");
  });

  test("floats the engine wrote beside the vectors are the answer's text as they came", async () => {
    const vector = randomVector(4);
    const body = await rendered([vector], "float", ["[0.25,-1]"]);
    assert.deepEqual(body.data[0].embedding, [0.25, -1]);
  });

  test("a non-finite value (never in a unit vector) is written as JSON writes it, null, and the body stays JSON", async () => {
    const body = await rendered([Float32Array.from([0.5, Number.NaN, Number.POSITIVE_INFINITY])]);
    assert.deepEqual(body.data[0].embedding, [0.5, null, null]);
  });

  test("base64: the float32 values' little-endian bytes", async () => {
    const vector = randomVector(3);
    const body = await rendered([vector], "base64");
    const bytes = Buffer.from(body.data[0].embedding, "base64");
    assert.deepEqual(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), vector);
  });
});
