/**
 * Chooses an embedding model's served format by measurement (README, "Embeddings"): each candidate
 * per-tensor format is written from the published weights, checked against the numpy reference on the
 * fidelity set (minimum cosine, Spearman of every pair's similarity), and timed in the engine alone,
 * candidates interleaved round by round so a busy machine slows them alike. Prints a table, writes JSON.
 *
 *   npm run build && npm run bench:embedding-formats -- [--zip MODEL.zip] [--rounds 4] [--out bench/results/embedding-formats] [--only REGEX]
 *
 * `--zip`: a sentence-transformers folder zipped (default: the pulled all-MiniLM-L6-v2's). Needs the
 * reference Python (scripts/test-setup.sh makes it). Candidates other than Q8_0's served mix name
 * MiniLM's tensors, which every BERT converted here shares. The `onnx` candidates are the same weights
 * as ONNX graphs (catalog/convert/bert-onnx.ts) on ONNX Runtime, tokenized by the served GGUF.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import type { BertPrecision } from "../src/catalog/convert/bert-gguf.js";
import type { BertOnnxPrecision } from "../src/catalog/convert/bert-onnx.js";
import { cosine, minilmDir, referenceEmbeddings, referencePython } from "../test/helpers/embeddings.js";
import { FIDELITY_SENTENCES, pairwiseSimilarities, spearman } from "../test/helpers/embedding-sentences.js";

// From dist/: the embedding runner is a worker thread, which loads compiled JavaScript.
const { Q8_0_KEPT_F16, writeBertGguf } = (await import(
  "../dist/catalog/convert/bert-gguf.js" as string
)) as typeof import("../src/catalog/convert/bert-gguf.js");
const { readSentenceTransformersZip } = (await import(
  "../dist/catalog/convert/sentence-transformers.js" as string
)) as typeof import("../src/catalog/convert/sentence-transformers.js");
const { encodeBertOnnx } = (await import(
  "../dist/catalog/convert/bert-onnx.js" as string
)) as typeof import("../src/catalog/convert/bert-onnx.js");
const { createEmbeddingHost } = (await import(
  "../dist/engine/embedding/embedding-host.js" as string
)) as typeof import("../src/engine/embedding/embedding-host.js");

const FLOOR = { minCosine: 0.9995, spearman: 0.999 };
const NEVER = /^$/;
const CANDIDATES: Array<{ name: string; precision: BertPrecision; keptF16?: RegExp; onnx?: BertOnnxPrecision }> = [
  { name: "onnx fp32 (ONNX Runtime)", precision: "q8_0", onnx: "fp32" },
  { name: "onnx int8: attn out + FFN (ONNX Runtime)", precision: "q8_0", onnx: "int8" },
  { name: "f32", precision: "f32" },
  { name: "f16", precision: "f16" },
  { name: "bf16", precision: "bf16" },
  { name: "q8_0, every matrix", precision: "q8_0", keptF16: NEVER },
  { name: "q8_0, attn_v F16", precision: "q8_0", keptF16: /^blk\.\d+\.attn_v\.weight$/ },
  { name: "q8_0, attn_v + ffn_down F16", precision: "q8_0", keptF16: /^blk\.\d+\.(attn_v|ffn_down)\.weight$/ },
  { name: "q8_0, attention F16", precision: "q8_0", keptF16: /^blk\.\d+\.attn_(q|k|v|output)\.weight$/ },
  { name: "q8_0, attn_v + ffn_up F16 (served)", precision: "q8_0", keptF16: Q8_0_KEPT_F16 },
];

const { values: args } = parseArgs({
  options: {
    zip: { type: "string", default: join(minilmDir(), "model.zip") },
    rounds: { type: "string", default: "4" },
    out: { type: "string", default: "bench/results/embedding-formats" },
    threads: { type: "string", default: "2" },
    /** Only the candidates whose name matches (a regular expression), e.g. "onnx|served". */
    only: { type: "string", default: "" },
  },
});
const chosen = new RegExp(args.only);
for (let i = CANDIDATES.length - 1; i >= 0; i--)
  if (!chosen.test(CANDIDATES[i]!.name) && CANDIDATES[i]!.name !== "f32") CANDIDATES.splice(i, 1);
const python = referencePython();
if (!python) throw new Error("no reference Python: run scripts/test-setup.sh");
const reference = referenceEmbeddings(python, FIDELITY_SENTENCES, args.zip);
const referencePairs = pairwiseSimilarities(reference.embeddings, cosine);
const model = await readSentenceTransformersZip(args.zip);
const dir = mkdtempSync(join(tmpdir(), "embedding-formats-"));
const SHORT = Array.from({ length: 256 }, (_, i) => `Short input number ${i} about embeddings, search and vectors.`);

interface Row {
  name: string;
  mb: number;
  minCosine: number;
  meanCosine: number;
  spearman: number;
  /** Each input embedded alone: the least cosine to the reference, and to its own embedding in the batch. */
  aloneMinCosine: number;
  aloneToBatch: number;
  meetsFloor: boolean;
  inputsPerS: number[];
  singleMs: number[];
}
const rows: Row[] = [];
try {
  for (const [index, candidate] of CANDIDATES.entries()) {
    const path = join(dir, `${index}.gguf`);
    await writeBertGguf(model, path, "candidate", candidate.precision, candidate.keptF16);
    if (candidate.onnx) writeFileSync(onnxPathOf(index), encodeBertOnnx(model, candidate.onnx));
    const host = await hostOf(index);
    const inputs = reference.ids.map((ids) => Int32Array.from(ids));
    const vectors = (await host.embed(inputs, "default")).vectors.map((v) => Array.from(v));
    const alone: number[][] = [];
    for (const input of inputs) alone.push(Array.from((await host.embed([input], "default")).vectors[0]!));
    await host.close();
    const aloneCosines = alone.map((v, i) => cosine(v, reference.embeddings[i]!));
    const cosines = vectors.map((v, i) => cosine(v, reference.embeddings[i]!));
    const minCosine = Math.min(...cosines);
    const rho = spearman(pairwiseSimilarities(vectors, cosine), referencePairs);
    rows.push({
      name: candidate.name,
      mb: statSync(candidate.onnx ? onnxPathOf(index) : path).size / 1e6,
      minCosine,
      meanCosine: cosines.reduce((a, b) => a + b) / cosines.length,
      spearman: rho,
      aloneMinCosine: Math.min(...aloneCosines),
      aloneToBatch: Math.min(...alone.map((v, i) => cosine(v, vectors[i]!))),
      meetsFloor: minCosine >= FLOOR.minCosine && rho >= FLOOR.spearman && Math.min(...aloneCosines) >= FLOOR.minCosine,
      inputsPerS: [],
      singleMs: [],
    });
  }
  for (let round = 0; round < Number(args.rounds); round++) {
    for (const [index, row] of rows.entries()) await timeRound(index, row);
    process.stderr.write(`round ${round + 1} of ${args.rounds}\n`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

function onnxPathOf(index: number): string {
  return join(dir, `${index}.onnx`);
}

/** Candidate `index` in the engine: its GGUF on llama.cpp, or its ONNX graph on ONNX Runtime (the GGUF tokenizing). */
function hostOf(index: number) {
  const onnxPath = CANDIDATES[index]!.onnx ? onnxPathOf(index) : undefined;
  return createEmbeddingHost({ modelPath: join(dir, `${index}.gguf`), threads: Number(args.threads), onnxPath });
}

/** One round: 256 short inputs in one batch, then 10 single inputs one after another. */
async function timeRound(index: number, row: Row): Promise<void> {
  const host = await hostOf(index);
  try {
    const inputs = await Promise.all(SHORT.map((text) => host.tokenize(text)));
    let started = performance.now();
    await host.embed(inputs, "default");
    row.inputsPerS.push(inputs.length / ((performance.now() - started) / 1000));
    for (let k = 0; k < 10; k++) {
      started = performance.now();
      await host.embed([inputs[k]!], "default");
      row.singleMs.push(performance.now() - started);
    }
  } finally {
    await host.close();
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
const f32 = rows.find((r) => r.name === "f32")!;
const table = rows.map((r) => ({
  format: r.name,
  MB: r.mb.toFixed(1),
  "min cosine": r.minCosine.toFixed(5),
  Spearman: r.spearman.toFixed(5),
  "alone: min cosine": r.aloneMinCosine.toFixed(5),
  "alone ÷ batched": r.aloneToBatch.toFixed(6),
  floor: r.meetsFloor ? "holds" : "missed",
  "256 inputs/s (median)": median(r.inputsPerS).toFixed(1),
  "÷ f32": (median(r.inputsPerS) / median(f32.inputsPerS)).toFixed(2),
  "single input p50 ms": median(r.singleMs).toFixed(2),
}));
console.table(table);
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(
  `${args.out}.json`,
  JSON.stringify(
    {
      date: new Date().toISOString(),
      floor: FLOOR,
      sentences: FIDELITY_SENTENCES.length,
      threads: Number(args.threads),
      rounds: Number(args.rounds),
      rows,
    },
    null,
    2,
  ),
);
console.log(`wrote ${args.out}.json`);
