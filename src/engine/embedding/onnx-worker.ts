import { parentPort, workerData } from "node:worker_threads";
import ort from "onnxruntime-node";
import type { EmbedFailure, EmbedMessage, EmbedReply, OnnxRunnerInit } from "./embedding-protocol.js";

/**
 * The embedding runner on ONNX Runtime: the model's ONNX graph (catalog/convert/bert-onnx.ts: fused
 * attention, mean pooling and L2 normalisation inside), on this worker thread. Each message is one
 * batch of inputs of any lengths; ONNX Runtime takes a rectangle, so the inputs are sorted by length
 * and run in groups padded to their longest (the mask keeps padding out of attention and pooling),
 * a group closed where padding would pass PADDING_SHARE of its tokens.
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
/** Padded tokens a group may hold beyond its real ones, as a share of the real ones. */
const PADDING_SHARE = 0.25;

interface Group {
  inputs: number[];
  longest: number;
}

/** Inputs in ascending length, cut into groups whose padding stays under PADDING_SHARE. */
function groups(lengths: number[]): Group[] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a]! - lengths[b]!);
  const out: Group[] = [];
  let current: Group = { inputs: [], longest: 0 };
  let real = 0;
  for (const input of order) {
    const length = lengths[input]!;
    const padded = (current.inputs.length + 1) * length;
    if (current.inputs.length > 0 && padded > (real + length) * (1 + PADDING_SHARE)) {
      out.push(current);
      current = { inputs: [], longest: 0 };
      real = 0;
    }
    current.inputs.push(input);
    current.longest = length;
    real += length;
  }
  if (current.inputs.length > 0) out.push(current);
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
  return { type: "embedded", vectors, decodeMs: performance.now() - started };
}

// A first run touches ONNX Runtime's arenas and threads before any request waits on them.
await embed({ type: "embed", tokens: new Int32Array(64).fill(init.warmUpToken), lengths: [32, 32] });

parentPort!.on("message", async (message: EmbedMessage | { type: "close" }) => {
  if (message.type === "close") {
    await session.release();
    parentPort!.postMessage({ type: "closed" });
    return;
  }
  try {
    const reply = await embed(message);
    parentPort!.postMessage(reply, [reply.vectors.buffer as ArrayBuffer]);
  } catch (error) {
    parentPort!.postMessage({ type: "failed", message: (error as Error).message } satisfies EmbedFailure);
  }
});
parentPort!.postMessage({ type: "ready", dimensions });
