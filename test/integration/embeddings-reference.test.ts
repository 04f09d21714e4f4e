import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { loadCatalog } from "../../src/catalog/load.js";
import { GgmlType, readGgufLayout } from "../../src/catalog/gguf/layout.js";
import { loadModel } from "../../src/engine/native/loaded-model.js";
import { FIDELITY_SENTENCES, FIRST_LONG, pairwiseSimilarities, spearman } from "../helpers/embedding-sentences.js";
import { cosine, MINILM, minilmDir, referenceEmbeddings, referencePython } from "../helpers/embeddings.js";
import { startServer, type RunningServer } from "../helpers/server.js";

// 71 texts, short and long (the longest ~430 tokens), in one batch: the fidelity floor's set.
const SENTENCES = FIDELITY_SENTENCES;
const LONG_INPUT = FIRST_LONG;
/** The floor a served format must hold against the reference (README, "Embeddings"). */
const MIN_COSINE = 0.9995;
const MIN_SPEARMAN = 0.999;
const F32_ID = "test/all-MiniLM-L6-v2-f32";

/** The catalog's MiniLM entry again as `precision: "f32"`, converted from the same zip: the exact format. */
async function f32Catalog(dir: string): Promise<string> {
  const minilm = (await loadCatalog()).find((e) => e.id === MINILM)!;
  const file = join(dir, "catalog.json");
  writeFileSync(
    file,
    JSON.stringify({
      models: [minilm, { ...minilm, aliases: undefined, id: F32_ID, source: `file:${join(minilmDir(), "model.zip")}`, precision: "f32" }],
    }),
  );
  return file;
}

const python = referencePython();

describe(
  "all-MiniLM-L6-v2 matches a reference computed without llama.cpp",
  { skip: python ? false : "no Python with numpy and tokenizers (.cache/py-embed; scripts/test-setup.sh makes it)" },
  () => {
    let server: RunningServer;
    let catalogDir: string;
    let reference: { ids: number[][]; embeddings: number[][] };
    before(async () => {
      reference = referenceEmbeddings(python!, SENTENCES);
      catalogDir = mkdtempSync(join(tmpdir(), "switchyard-catalog-"));
      server = await startServer({ models: [MINILM, F32_ID], env: { SWITCHYARD_CATALOG: await f32Catalog(catalogDir) } });
    });
    after(async () => {
      await server?.stop();
      rmSync(catalogDir, { recursive: true, force: true });
    });

    test("the converted GGUF tokenizes exactly as tokenizer.json does (token ids equal)", () => {
      const gguf = readdirSync(minilmDir()).find((name) => name.endsWith(".Q8_0.gguf"))!;
      const model = loadModel(join(minilmDir(), gguf));
      try {
        SENTENCES.forEach((sentence, i) => assert.deepEqual(model.tokenize(sentence, { addSpecial: true }), reference.ids[i], sentence));
        const longest = Math.max(...reference.ids.map((ids) => ids.length));
        assert.ok(
          reference.ids[LONG_INPUT]!.length > 100 && longest > 400 && longest <= 512,
          `the long inputs have ${longest} tokens at most`,
        );
      } finally {
        model.free();
      }
    });

    test("a long text is tokenized a slice at a time (the event loop free between), giving exactly its whole tokenization", async () => {
      const gguf = readdirSync(minilmDir()).find((name) => name.endsWith(".Q8_0.gguf"))!;
      const model = loadModel(join(minilmDir(), gguf));
      try {
        // Over 100 KB: a dozen slices, cut at whitespace of every kind, words of every sentence.
        const text = Array.from({ length: 2000 }, (_, i) => `${SENTENCES[i % SENTENCES.length]}${i % 2 ? "\n\t" : "  "}`).join("");
        assert.ok(text.length > 100_000);
        const response = await fetch(`${server.url}/v1/tokenize`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
          body: JSON.stringify({ model: MINILM, prompt: text }),
        });
        assert.equal(response.status, 200);
        assert.deepEqual(((await response.json()) as { tokens: number[] }).tokens, model.tokenize(text, { addSpecial: true }));
      } finally {
        model.free();
      }
    });

    test("the served Q8_0 holds the floor: every embedding within cosine 0.9995 of the numpy forward, pairwise similarities ranked alike (Spearman 0.999)", async () => {
      const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
      const response = await client.embeddings.create({ model: MINILM, input: SENTENCES });
      assert.equal(response.data.length, SENTENCES.length);
      response.data.forEach((item, i) => {
        assert.equal(item.index, i);
        assert.equal(item.embedding.length, 384);
        const similarity = cosine(item.embedding, reference.embeddings[i]!);
        assert.ok(similarity >= MIN_COSINE, `input ${i} (${JSON.stringify(SENTENCES[i]!.slice(0, 40))}): cosine ${similarity}`);
        assert.ok(Math.abs(Math.hypot(...item.embedding) - 1) < 1e-5, "unit length");
      });
      const rho = spearman(
        pairwiseSimilarities(
          response.data.map((d) => d.embedding),
          cosine,
        ),
        pairwiseSimilarities(reference.embeddings, cosine),
      );
      assert.ok(rho >= MIN_SPEARMAN, `Spearman ${rho}`);
      assert.equal(
        response.usage.prompt_tokens,
        reference.ids.reduce((sum, ids) => sum + ids.length, 0),
      );
    });

    test("each input sent alone holds the floor too, and stays within it of its embedding in the batch (batches under 64 tokens run without flash attention)", async () => {
      const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
      const together = (await client.embeddings.create({ model: MINILM, input: SENTENCES })).data.map((d) => d.embedding);
      let underSixtyFour = 0;
      for (const [i, sentence] of SENTENCES.entries()) {
        const alone = (await client.embeddings.create({ model: MINILM, input: sentence })).data[0]!.embedding;
        if (reference.ids[i]!.length < 64) underSixtyFour++;
        const label = `input ${i} (${reference.ids[i]!.length} tokens, ${JSON.stringify(sentence.slice(0, 40))})`;
        const toReference = cosine(alone, reference.embeddings[i]!);
        assert.ok(toReference >= MIN_COSINE, `${label}: cosine ${toReference} to the reference`);
        const toBatch = cosine(alone, together[i]!);
        // Q8_0 quantizes each path's activations its own way: 3-token inputs differ most (0.99972 measured).
        assert.ok(toBatch >= MIN_COSINE, `${label}: cosine ${toBatch} to its embedding in the batch`);
      }
      assert.ok(underSixtyFour > 10 && underSixtyFour < SENTENCES.length, `${underSixtyFour} inputs alone run on each path`);
    });

    test("the served file is the measured mix: layer matrices Q8_0, attn_v and ffn_up F16, token embeddings, norms and biases F32; /models says q8_0", async () => {
      const gguf = readdirSync(minilmDir()).find((name) => name.endsWith(".Q8_0.gguf"))!;
      const types = new Map((await readGgufLayout(join(minilmDir(), gguf))).tensors.map((t) => [t.name, t.type]));
      for (const name of ["blk.0.attn_q.weight", "blk.3.attn_k.weight", "blk.5.attn_output.weight", "blk.1.ffn_down.weight"])
        assert.equal(types.get(name), GgmlType.Q8_0, name);
      for (const name of ["blk.0.attn_v.weight", "blk.4.ffn_up.weight"]) assert.equal(types.get(name), GgmlType.F16, name);
      for (const name of ["blk.2.attn_q.bias", "blk.0.layer_output_norm.weight", "position_embd.weight", "token_embd.weight"])
        assert.equal(types.get(name), GgmlType.F32, name);
      const models = (await (await fetch(`${server.baseURL}/models`, { headers: { authorization: `Bearer ${server.key}` } })).json()) as {
        data: Array<{ id: string; metadata: { precision: string } }>;
      };
      assert.deepEqual(
        models.data
          .filter((m) => m.id === MINILM || m.id === F32_ID)
          .map((m) => [m.id, m.metadata.precision])
          .sort(),
        [
          [MINILM, "q8_0"],
          [F32_ID, "f32"],
        ].sort(),
      );
    });

    test("an entry with precision f32 serves the published weights exactly: cosine 0.99999 on every input", async () => {
      const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
      const response = await client.embeddings.create({ model: F32_ID, input: SENTENCES });
      response.data.forEach((item, i) => assert.ok(cosine(item.embedding, reference.embeddings[i]!) >= 0.99999, `input ${i}`));
    });

    test("the reference's token ids as input embed like the text they came from", async () => {
      const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
      const fromIds = await client.embeddings.create({ model: MINILM, input: reference.ids.slice(0, 3) });
      fromIds.data.forEach((item, i) => assert.ok(cosine(item.embedding, reference.embeddings[i]!) >= 0.999));
    });

    test("a sentence about eating is closer to another about eating than to one about riding", async () => {
      const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
      const [food, bread, horse] = (await client.embeddings.create({ model: MINILM, input: SENTENCES.slice(4, 7) })).data.map(
        (d) => d.embedding,
      );
      assert.ok(cosine(food!, bread!) > cosine(food!, horse!), `${cosine(food!, bread!)} vs ${cosine(food!, horse!)}`);
    });
  },
);
