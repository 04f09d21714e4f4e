/**
 * A sentence-transformers BERT (mean pooling, Normalize) as an ONNX graph for ONNX Runtime's CPU
 * provider, written from the safetensors: ONNX Runtime's fused contrib operators where they are faster
 * (Attention, BiasGelu: the graph its own transformer optimizer makes of an exported BERT, less its
 * SkipLayerNormalization, see `skipLayerNorm`), then mean pooling over the attention mask and L2
 * normalisation inside the graph.
 * Inputs: `input_ids` and `attention_mask`, int32 [batch, sequence]; output `sentence_embedding`,
 * float [batch, hidden], unit length.
 */
import { encodeOnnxModel, OnnxType, type OnnxGraph, type OnnxInitializer, type OnnxNode } from "../onnx/onnx-writer.js";
import type { SafeTensor } from "./safetensors.js";
import type { SentenceTransformersModel } from "./sentence-transformers.js";

/** `int8`: the attention output and feed-forward matrices int8 per column (DynamicQuantizeMatMul); attention stays fp32. */
export const BERT_ONNX_PRECISIONS = ["fp32", "int8"] as const;
export type BertOnnxPrecision = (typeof BERT_ONNX_PRECISIONS)[number];

const MS = "com.microsoft";

interface Shape {
  hidden: number;
  intermediate: number;
  heads: number;
  layers: number;
  epsilon: number;
}

class GraphBuilder {
  readonly nodes: OnnxNode[] = [];
  readonly initializers: OnnxInitializer[] = [];
  private readonly tensors: Map<string, SafeTensor>;

  constructor(tensors: Map<string, SafeTensor>) {
    this.tensors = new Map([...tensors].map(([name, tensor]) => [name.replace(/^bert\./, ""), tensor]));
  }

  /** A source tensor's floats (F32 sources only, as the GGUF converter takes). */
  floats(name: string): Float32Array {
    const tensor = this.tensors.get(name);
    if (!tensor) throw new Error(`model.safetensors has no tensor ${name}`);
    if (tensor.dtype !== "F32") throw new Error(`tensor ${name} is ${tensor.dtype}; only F32 sources are converted`);
    const { buffer, byteOffset, byteLength } = tensor.data;
    return new Float32Array(buffer.slice(byteOffset, byteOffset + byteLength));
  }

  constant(name: string, type: OnnxInitializer["type"], dims: number[], values: ArrayBufferView): string {
    this.initializers.push({ name, type, dims, data: Buffer.from(values.buffer, values.byteOffset, values.byteLength) });
    return name;
  }

  /** A source vector (bias, LayerNorm gamma or beta) as an initializer of the same name. */
  vector(name: string): string {
    const values = this.floats(name);
    return this.constant(name, OnnxType.FLOAT, [values.length], values);
  }

  add(op: string, inputs: string[], output: string, extra: Partial<OnnxNode> = {}): string {
    this.nodes.push({ op, inputs, outputs: [output], ...extra });
    return output;
  }
}

/** PyTorch's Linear weight [out, in] as MatMul's right-hand side [in, out]; several stacked side by side. */
function transposed(weights: Float32Array[], rows: number): { values: Float32Array; columns: number } {
  const columnsEach = weights[0]!.length / rows;
  const columns = columnsEach * weights.length; // each source is [columnsEach, rows]
  const values = new Float32Array(rows * columns);
  weights.forEach((w, part) => {
    for (let out = 0; out < columnsEach; out++)
      for (let i = 0; i < rows; i++) values[i * columns + part * columnsEach + out] = w[out * rows + i]!;
  });
  return { values, columns };
}

/** Symmetric int8 per output column: scale = the column's largest magnitude / 127, zero point 0. */
function quantizeColumns(values: Float32Array, rows: number, columns: number): { q: Int8Array; scales: Float32Array } {
  const scales = new Float32Array(columns);
  for (let i = 0; i < values.length; i++) scales[i % columns] = Math.max(scales[i % columns]!, Math.abs(values[i]!));
  for (let c = 0; c < columns; c++) scales[c] = scales[c]! / 127 || 1;
  const q = new Int8Array(rows * columns);
  for (let i = 0; i < values.length; i++) q[i] = Math.round(values[i]! / scales[i % columns]!);
  return { q, scales };
}

/** `x · Wᵀ + b` for the Linear `prefix`: fp32 MatMul then a bias the next fused op takes, or int8 with the bias inside. */
function linear(g: GraphBuilder, x: string, prefix: string, rows: number, int8: boolean): { out: string; bias?: string } {
  const { values, columns } = transposed([g.floats(`${prefix}.weight`)], rows);
  if (!int8) {
    const w = g.constant(`${prefix}.weight`, OnnxType.FLOAT, [rows, columns], values);
    return { out: g.add("MatMul", [x, w], `${prefix}.matmul`), bias: g.vector(`${prefix}.bias`) };
  }
  const { q, scales } = quantizeColumns(values, rows, columns);
  const w = g.constant(`${prefix}.weight_int8`, OnnxType.INT8, [rows, columns], q);
  const scale = g.constant(`${prefix}.weight_scale`, OnnxType.FLOAT, [columns], scales);
  const zero = g.constant(`${prefix}.weight_zero`, OnnxType.INT8, [columns], new Int8Array(columns));
  return { out: g.add("DynamicQuantizeMatMul", [x, w, scale, zero, g.vector(`${prefix}.bias`)], `${prefix}.out`, { domain: MS }) };
}

/**
 * LayerNorm(x + b + skip) as two Adds and the standard LayerNormalization, not ONNX Runtime's fused
 * SkipLayerNormalization: on its CPU provider (1.31) the fused kernel took 6.2 ms of a 32 × 16-token
 * run's 65 (9.7%), the three standard operators 2.0 ms, so 256 short inputs run 1.14x faster
 * (docs/benchmarks/2026-12-06-embeddings-layer-norm.md). ONNX Runtime does not fuse them back here.
 */
function skipLayerNorm(g: GraphBuilder, x: string, skip: string, prefix: string, bias: string | undefined, shape: Shape): string {
  const biased = bias ? g.add("Add", [x, bias], `${prefix}.biased`) : x;
  const summed = g.add("Add", [biased, skip], `${prefix}.summed`);
  const norm = [g.vector(`${prefix}.weight`), g.vector(`${prefix}.bias`)];
  return g.add("LayerNormalization", [summed, ...norm], `${prefix}.out`, {
    attributes: { epsilon: { float: shape.epsilon }, axis: { int: -1 } },
  });
}

function encoderLayer(g: GraphBuilder, x: string, mask: string, layer: number, shape: Shape, int8: boolean): string {
  const p = `encoder.layer.${layer}`;
  const heads = ["query", "key", "value"].map((part) => `${p}.attention.self.${part}`);
  const qkv = transposed(
    heads.map((h) => g.floats(`${h}.weight`)),
    shape.hidden,
  );
  const weights = g.constant(`${p}.attention.qkv.weight`, OnnxType.FLOAT, [shape.hidden, qkv.columns], qkv.values);
  const biases = Float32Array.from(heads.flatMap((h) => [...g.floats(`${h}.bias`)]));
  const bias = g.constant(`${p}.attention.qkv.bias`, OnnxType.FLOAT, [biases.length], biases);
  const attention = g.add("Attention", [x, weights, bias, mask], `${p}.attention.out`, {
    domain: MS,
    attributes: { num_heads: { int: shape.heads } },
  });
  const projected = linear(g, attention, `${p}.attention.output.dense`, shape.hidden, int8);
  const attended = skipLayerNorm(g, projected.out, x, `${p}.attention.output.LayerNorm`, projected.bias, shape);
  const up = linear(g, attended, `${p}.intermediate.dense`, shape.hidden, int8);
  const activated = up.bias
    ? g.add("BiasGelu", [up.out, up.bias], `${p}.intermediate.gelu`, { domain: MS })
    : g.add("Gelu", [up.out], `${p}.intermediate.gelu`, { domain: MS });
  const down = linear(g, activated, `${p}.output.dense`, shape.intermediate, int8);
  return skipLayerNorm(g, down.out, attended, `${p}.output.LayerNorm`, down.bias, shape);
}

/** Word + position + token type 0 embeddings (the last two summed here, once), then LayerNorm. */
function embeddings(g: GraphBuilder, shape: Shape): string {
  const vocabulary = g.floats("embeddings.word_embeddings.weight");
  const words = g.constant(
    "embeddings.word_embeddings.weight",
    OnnxType.FLOAT,
    [vocabulary.length / shape.hidden, shape.hidden],
    vocabulary,
  );
  const positions = g.floats("embeddings.position_embeddings.weight");
  const typeZero = g.floats("embeddings.token_type_embeddings.weight").subarray(0, shape.hidden);
  for (let i = 0; i < positions.length; i++) positions[i] = positions[i]! + typeZero[i % shape.hidden]!;
  const table = g.constant("embeddings.position_and_type", OnnxType.FLOAT, [positions.length / shape.hidden, shape.hidden], positions);
  const gathered = g.add("Gather", [words, "input_ids"], "embeddings.words");
  const dims = g.add("Shape", ["input_ids"], "embeddings.input_shape");
  const one = g.constant("const.one", OnnxType.INT64, [1], BigInt64Array.of(1n));
  const two = g.constant("const.two", OnnxType.INT64, [1], BigInt64Array.of(2n));
  const zero = g.constant("const.zero", OnnxType.INT64, [1], BigInt64Array.of(0n));
  const length = g.add("Slice", [dims, one, two], "embeddings.sequence_length");
  const rows = g.add("Slice", [table, zero, length, zero], "embeddings.positions");
  const summed = g.add("Add", [gathered, rows], "embeddings.sum");
  const norm = [g.vector("embeddings.LayerNorm.weight"), g.vector("embeddings.LayerNorm.bias")];
  return g.add("LayerNormalization", [summed, ...norm], "embeddings.out", {
    attributes: { epsilon: { float: shape.epsilon }, axis: { int: -1 } },
  });
}

/** Mean over the tokens the mask keeps, then unit length. */
function meanPoolNormalized(g: GraphBuilder, hidden: string): string {
  const maskFloat = g.add("Cast", ["attention_mask"], "pool.mask_float", { attributes: { to: { int: OnnxType.FLOAT } } });
  const axisOne = g.constant("const.axis_one", OnnxType.INT64, [1], BigInt64Array.of(1n));
  const axisTwo = g.constant("const.axis_two", OnnxType.INT64, [1], BigInt64Array.of(2n));
  const mask = g.add("Unsqueeze", [maskFloat, axisTwo], "pool.mask");
  const masked = g.add("Mul", [hidden, mask], "pool.masked");
  const sum = g.add("ReduceSum", [masked, axisOne], "pool.sum", { attributes: { keepdims: { int: 0 } } });
  const count = g.add("ReduceSum", [mask, axisOne], "pool.count", { attributes: { keepdims: { int: 0 } } });
  const floor = g.constant("const.min_count", OnnxType.FLOAT, [], Float32Array.of(1e-9));
  const mean = g.add("Div", [sum, g.add("Max", [count, floor], "pool.count_floor")], "pool.mean");
  return g.add("LpNormalization", [mean], "sentence_embedding", { attributes: { axis: { int: -1 }, p: { int: 2 } } });
}

function hparam(config: Record<string, unknown>, key: string): number {
  const value = config[key];
  if (typeof value !== "number") throw new Error(`config.json has no number ${key}`);
  return value;
}

export function bertOnnxGraph(model: SentenceTransformersModel, precision: BertOnnxPrecision): OnnxGraph {
  const { config } = model;
  if (config.model_type !== "bert") throw new Error(`config.json's model_type is ${String(config.model_type)}, not bert`);
  if (model.pooling !== "mean") throw new Error(`the ONNX graph pools by mean; this model pools by ${model.pooling}`);
  if (config.hidden_act !== undefined && config.hidden_act !== "gelu")
    throw new Error(`hidden_act ${String(config.hidden_act)} is not gelu`);
  const shape: Shape = {
    hidden: hparam(config, "hidden_size"),
    intermediate: hparam(config, "intermediate_size"),
    heads: hparam(config, "num_attention_heads"),
    layers: hparam(config, "num_hidden_layers"),
    epsilon: hparam(config, "layer_norm_eps"),
  };
  const g = new GraphBuilder(model.tensors);
  const mask = g.add("Cast", ["attention_mask"], "attention.mask_index", { attributes: { to: { int: OnnxType.INT32 } } });
  let hidden = embeddings(g, shape);
  for (let layer = 0; layer < shape.layers; layer++) hidden = encoderLayer(g, hidden, mask, layer, shape, precision === "int8");
  const output = meanPoolNormalized(g, hidden);
  return {
    name: "sentence_embedding",
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: ["input_ids", "attention_mask"].map((name) => ({ name, type: OnnxType.INT32, shape: ["batch", "sequence"] })),
    outputs: [{ name: output, type: OnnxType.FLOAT, shape: ["batch", shape.hidden] }],
  };
}

/**
 * The graph's layout, named in the served file's manifest and path: a change to the graph written here
 * bumps it, so a cached file of the old layout is written again (and a build of the old layout keeps its own).
 */
export const BERT_ONNX_LAYOUT = "fp32-v2";

/** The model file's bytes: opset 17 (LayerNormalization) and ONNX Runtime's contrib domain. */
export function encodeBertOnnx(model: SentenceTransformersModel, precision: BertOnnxPrecision): Buffer {
  return encodeOnnxModel(bertOnnxGraph(model, precision), { "": 17, [MS]: 1 }, "switchyard");
}
