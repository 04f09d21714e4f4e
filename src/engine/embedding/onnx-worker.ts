import { parentPort, workerData } from "node:worker_threads";
import ort from "onnxruntime-node";
import {
  transferList,
  vectorsJson,
  type EmbedFailure,
  type EmbedMessage,
  type EmbedReply,
  type OnnxRunnerInit,
} from "./embedding-protocol.js";

/**
 * The embedding runner on ONNX Runtime: the model's ONNX graph (catalog/convert/bert-onnx.ts: fused
 * attention, mean pooling and L2 normalisation inside), on this worker thread. Each message is one
 * batch of inputs of any lengths; ONNX Runtime takes a rectangle, so the inputs are sorted by length
 * and run in groups padded to their longest (the mask keeps padding out of attention and pooling),
 * cut where a run's fixed cost outweighs the padding (`groups`).
 */
const init = workerData as OnnxRunnerInit;
const session = await ort.InferenceSession.create(init.modelPath, {
  intraOpNumThreads: init.threads,
  interOpNumThreads: 1,
  executionMode: "sequential",
  graphOptimizationLevel: "all",
  // ONNX Runtime's pool threads spin within a run (for the next operator's work) and, by default, on
  // after it; stopped when the run ends, they leave the cores to the main and database threads
  // between requests. One short input a request, 2 threads on a busy 2-core Sapphire Rapids: the two
  // runner threads' CPU 16.8 → 11.3 ms a request, latency p50 unchanged (12.6 against 11.5-14.4 ms);
  // spinning off altogether (intra_op.allow_spinning 0) gave 9.6 ms, its p50 13.3-14.0.
  extra: { session: { force_spinning_stop: "1" } },
});
const dimensions = await probeDimensions();
/**
 * A run's fixed cost in tokens' worth of work: ONNX Runtime's every run walks all the operators and
 * wakes its pool whatever the rectangle's size. Measured on a 2-core AMD EPYC (Zen 5), 2 threads,
 * inputs of 16 tokens: one input 2.4-2.6 ms, 32 in one run 34-36 ms, about 0.07 ms a token beyond
 * a fixed 1.3-2 ms, so a run costs what about 24 tokens do.
 */
const RUN_TOKENS = 24;

interface Group {
  inputs: number[];
  longest: number;
}

/**
 * The inputs in ascending length, cut into the groups that cost least: each group runs as one
 * rectangle padded to its longest input, a run costing RUN_TOKENS plus its padded tokens (the mask
 * keeps padding out of attention and pooling). Dynamic programming over the cut points: with
 * ascending lengths the best groups are contiguous runs of them (256 inputs: 33,000 steps).
 */
function groups(lengths: number[]): Group[] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a]! - lengths[b]!);
  const n = order.length;
  // best[j]: the least cost of the first j inputs; cut[j]: where its last group starts.
  const best = new Float64Array(n + 1);
  const cut = new Int32Array(n + 1);
  for (let j = 1; j <= n; j++) {
    const longest = lengths[order[j - 1]!]!;
    best[j] = Infinity;
    for (let i = 0; i < j; i++) {
      const cost = best[i]! + RUN_TOKENS + (j - i) * longest;
      if (cost < best[j]!) {
        best[j] = cost;
        cut[j] = i;
      }
    }
  }
  const out: Group[] = [];
  for (let j = n; j > 0; j = cut[j]!) out.unshift({ inputs: order.slice(cut[j]!, j), longest: lengths[order[j - 1]!]! });
  return out;
}

/** The output's vector length, from one run of a two-token input (which also warms up ONNX Runtime's arenas). */
async function probeDimensions(): Promise<number> {
  const two = (values: number[]) => new ort.Tensor("int32", Int32Array.from(values), [1, 2]);
  const output = await session.run({ input_ids: two([init.warmUpToken, init.warmUpToken]), attention_mask: two([1, 1]) });
  return Number(output.sentence_embedding!.dims[1]);
}

async function runGroup(group: Group, message: EmbedMessage, starts: number[], vectors: Float32Array): Promise<void> {
  const { inputs, longest } = group;
  const ids = new Int32Array(inputs.length * longest);
  const mask = new Int32Array(inputs.length * longest);
  inputs.forEach((input, row) => {
    const length = message.lengths[input]!;
    ids.set(message.tokens.subarray(starts[input]!, starts[input]! + length), row * longest);
    mask.fill(1, row * longest, row * longest + length);
  });
  const dims = [inputs.length, longest];
  const output = await session.run({ input_ids: new ort.Tensor("int32", ids, dims), attention_mask: new ort.Tensor("int32", mask, dims) });
  const pooled = output.sentence_embedding!.data as Float32Array;
  inputs.forEach((input, row) => vectors.set(pooled.subarray(row * dimensions, (row + 1) * dimensions), input * dimensions));
}

async function embed(message: EmbedMessage): Promise<EmbedReply> {
  const starts: number[] = [];
  let at = 0;
  for (const length of message.lengths) {
    starts.push(at);
    at += length;
  }
  const vectors = new Float32Array(message.lengths.length * dimensions);
  const started = performance.now();
  for (const group of groups(message.lengths)) await runGroup(group, message, starts, vectors);
  const decodeMs = performance.now() - started;
  return { type: "embedded", vectors, decodeMs, ...(message.json ? { json: vectorsJson(vectors, dimensions) } : {}) };
}

// A first run touches ONNX Runtime's arenas and threads before any request waits on them.
await embed({ type: "embed", tokens: new Int32Array(64).fill(init.warmUpToken), lengths: [32, 32], json: true });

parentPort!.on("message", async (message: EmbedMessage | { type: "close" }) => {
  if (message.type === "close") {
    await session.release();
    parentPort!.postMessage({ type: "closed" });
    return;
  }
  try {
    const reply = await embed(message);
    parentPort!.postMessage(reply, transferList(reply));
  } catch (error) {
    parentPort!.postMessage({ type: "failed", message: (error as Error).message } satisfies EmbedFailure);
  }
});
parentPort!.postMessage({ type: "ready", dimensions });
