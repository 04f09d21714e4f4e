import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { FIDELITY_SENTENCES, pairwiseSimilarities, spearman } from "../helpers/embedding-sentences.js";
import { cosine, MINILM, minilmDir, referenceEmbeddings, referencePython } from "../helpers/embeddings.js";
import { BERT_ONNX_LAYOUT } from "../../src/catalog/convert/bert-onnx.js";
import { startServer, type RunningServer } from "../helpers/server.js";

/** The fidelity floor every served runtime holds against the numpy reference (docs/api/embeddings.md). */
const MIN_COSINE = 0.9995;
const MIN_SPEARMAN = 0.999;
/**
 * One input alone and the same input in a batch (issue 53, item 4): ONNX Runtime holds 0.99999. llama.cpp
 * does not yet (0.99996 on a 12-token input: alone it runs without flash attention, in a batch of 64
 * tokens or more with it), so it is held to the floor; it is not the default runtime.
 */
const ALONE_EQUALS_BATCHED = { onnx: 0.99999, llama: MIN_COSINE };

const python = referencePython();
/** The numpy reference over the fidelity sentences, computed once for both runtimes (about 6 s of CPU a pass). */
let fidelityReference: ReturnType<typeof referenceEmbeddings> | undefined;

/**
 * Each runtime SWITCHYARD_EMBEDDING_RUNTIME names, serving all-MiniLM-L6-v2 from the same pull: the
 * fidelity floor batched and alone, and each input alone equal to itself in a batch of 71 inputs of
 * 3 to ~430 tokens (padded together on ONNX Runtime, packed into sequences on llama.cpp).
 */
for (const runtime of ["onnx", "llama"] as const) {
  describe(
    `embeddings on SWITCHYARD_EMBEDDING_RUNTIME=${runtime}`,
    { skip: python ? false : "no Python with numpy and tokenizers (.cache/py-embed; scripts/test-setup.sh makes it)" },
    () => {
      let server: RunningServer;
      let reference: { ids: number[][]; embeddings: number[][] };
      let batched: number[][];
      let client: OpenAI;
      before(async () => {
        reference = fidelityReference ??= referenceEmbeddings(python!, FIDELITY_SENTENCES);
        server = await startServer({ models: [MINILM], env: { SWITCHYARD_EMBEDDING_RUNTIME: runtime } });
        client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
        batched = (await client.embeddings.create({ model: MINILM, input: FIDELITY_SENTENCES })).data.map((d) => d.embedding);
      });
      after(async () => await server?.stop());

      test("the batch holds the floor: each embedding within cosine 0.9995 of the reference, pairwise similarities ranked alike", () => {
        batched.forEach((embedding, i) => {
          assert.ok(
            cosine(embedding, reference.embeddings[i]!) >= MIN_COSINE,
            `input ${i}: ${cosine(embedding, reference.embeddings[i]!)}`,
          );
          assert.ok(Math.abs(Math.hypot(...embedding) - 1) < 1e-5, "unit length");
        });
        const rho = spearman(pairwiseSimilarities(batched, cosine), pairwiseSimilarities(reference.embeddings, cosine));
        assert.ok(rho >= MIN_SPEARMAN, `Spearman ${rho}`);
      });

      test(`each input alone holds the floor and equals its embedding in the batch to cosine ${ALONE_EQUALS_BATCHED[runtime]}`, async () => {
        const alone: number[][] = [];
        for (const sentence of FIDELITY_SENTENCES)
          alone.push((await client.embeddings.create({ model: MINILM, input: sentence })).data[0]!.embedding);
        alone.forEach((embedding, i) => {
          const label = `input ${i} (${reference.ids[i]!.length} tokens)`;
          assert.ok(
            cosine(embedding, reference.embeddings[i]!) >= MIN_COSINE,
            `${label}: ${cosine(embedding, reference.embeddings[i]!)} to the reference`,
          );
          const toBatch = cosine(embedding, batched[i]!);
          assert.ok(toBatch >= ALONE_EQUALS_BATCHED[runtime], `${label}: ${toBatch} to itself batched`);
        });
        const rho = spearman(pairwiseSimilarities(alone, cosine), pairwiseSimilarities(reference.embeddings, cosine));
        assert.ok(rho >= MIN_SPEARMAN, `Spearman ${rho}`);
      });

      if (runtime === "onnx")
        test("ONNX Runtime serves the fp32 graph written beside the GGUF at pull time: every input within cosine 0.99999 of the reference", () => {
          const graph = join(minilmDir(), `all-MiniLM-L6-v2.${BERT_ONNX_LAYOUT}.onnx`);
          assert.ok(existsSync(graph), "the ONNX graph beside the GGUF");
          assert.ok(existsSync(`${graph}.json`), "its manifest");
          // The Q8_0 GGUF llama.cpp serves reaches 0.9997-0.9998 on the shortest inputs: this is the fp32 graph.
          batched.forEach((embedding, i) => assert.ok(cosine(embedding, reference.embeddings[i]!) >= 0.99999, `input ${i}`));
        });
    },
  );
}
