import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { loadModel } from "../../src/engine/native/loaded-model.js";
import { cosine, MINILM, minilmDir, referenceEmbeddings, referencePython } from "../helpers/embeddings.js";
import { startServer, type RunningServer } from "../helpers/server.js";

const SENTENCES = [
  "The quick brown fox jumps over the lazy dog.",
  "Crème brûlée, naïve café, Ångström and façade: accents are stripped as BERT does.",
  "I love pizza 🍕 and rockets 🚀!!! (really) #yes",
  "word",
  // About 250 tokens: one long input beside the short ones, in the same batch.
  Array.from({ length: 18 }, (_, i) => `Sentence ${i + 1} of a long paragraph talks about retrieval, ranking and vectors.`).join(" "),
  "A man is eating food.",
  "A man is eating a piece of bread.",
  "A man is riding a horse.",
];

const python = referencePython();

describe("all-MiniLM-L6-v2 matches a reference computed without llama.cpp", { skip: python ? false : "no Python with numpy and tokenizers (.cache/py-embed; scripts/test-setup.sh makes it)" }, () => {
  let server: RunningServer;
  let reference: { ids: number[][]; embeddings: number[][] };
  before(async () => {
    reference = referenceEmbeddings(python!, SENTENCES);
    server = await startServer({ models: [MINILM] });
  });
  after(async () => {
    await server?.stop();
  });

  test("the converted GGUF tokenizes exactly as tokenizer.json does (token ids equal)", () => {
    const gguf = readdirSync(minilmDir()).find((name) => name.endsWith(".gguf"))!;
    const model = loadModel(join(minilmDir(), gguf));
    try {
      SENTENCES.forEach((sentence, i) => assert.deepEqual(model.tokenize(sentence, { addSpecial: true }), reference.ids[i], sentence));
      assert.ok(reference.ids[4]!.length > 200 && reference.ids[4]!.length < 300, `the long input has ${reference.ids[4]!.length} tokens`);
    } finally {
      model.free();
    }
  });

  test("every embedding is within cosine 0.999 of the numpy forward pass, and usage counts its tokens", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
    const response = await client.embeddings.create({ model: MINILM, input: SENTENCES });
    assert.equal(response.data.length, SENTENCES.length);
    response.data.forEach((item, i) => {
      assert.equal(item.index, i);
      assert.equal(item.embedding.length, 384);
      const similarity = cosine(item.embedding, reference.embeddings[i]!);
      assert.ok(similarity >= 0.999, `input ${i}: cosine ${similarity}`);
      assert.ok(Math.abs(Math.hypot(...item.embedding) - 1) < 1e-5, "unit length");
    });
    assert.equal(response.usage.prompt_tokens, reference.ids.reduce((sum, ids) => sum + ids.length, 0));
  });

  test("the reference's token ids as input embed like the text they came from", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
    const fromIds = await client.embeddings.create({ model: MINILM, input: reference.ids.slice(0, 3) });
    fromIds.data.forEach((item, i) => assert.ok(cosine(item.embedding, reference.embeddings[i]!) >= 0.999));
  });

  test("a sentence about eating is closer to another about eating than to one about riding", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
    const [food, bread, horse] = (await client.embeddings.create({ model: MINILM, input: SENTENCES.slice(5) })).data.map((d) => d.embedding);
    assert.ok(cosine(food!, bread!) > cosine(food!, horse!), `${cosine(food!, bread!)} vs ${cosine(food!, horse!)}`);
  });
});
