/**
 * A sentence-transformers BERT to llama.cpp's `bert` GGUF, written as llama.cpp's own
 * `convert_hf_to_gguf.py` writes it (class BertModel): the same tensor names, the same metadata, the
 * WordPiece vocabulary in its "phantom space" form (`##piece` becomes `piece`, a word-initial `word`
 * becomes `▁word`, control tokens stay as they are), non-causal attention and the pooling type.
 */
import { floatToHalfBits } from "../gguf/half.js";
import { GgmlType } from "../gguf/layout.js";
import { Q8_0_BLOCK_VALUES, quantizeQ8_0 } from "../gguf/q8-0.js";
import { writeGguf, type GgufTensor, type GgufValue } from "../gguf/writer.js";
import type { SafeTensor } from "./safetensors.js";
import type { SentenceTransformersModel, TokenizerJson } from "./sentence-transformers.js";

/** The precisions a converted BERT is written in (the catalog's schema accepts these). */
export const BERT_PRECISIONS = ["f32", "f16", "bf16", "q8_0"] as const;
export type BertPrecision = (typeof BERT_PRECISIONS)[number];

/** llama.cpp's `general.file_type` (`LLAMA_FTYPE_*`): the type of the model's large matrices. */
const FILE_TYPE: Record<BertPrecision, number> = { f32: 0, f16: 1, bf16: 32, q8_0: 7 };

/** llama.cpp's `LLAMA_POOLING_TYPE_*`. */
const POOLING_TYPE = { mean: 1, cls: 2, last: 3 } as const;
/** gguf-py's TokenType. */
const TOKEN_NORMAL = 1;
const TOKEN_CONTROL = 3;

/** Hugging Face BertModel tensor names to llama.cpp's (gguf-py's tensor_mapping.py, arch BERT). */
const LAYER_TENSORS: Record<string, string> = {
  "attention.self.query": "attn_q",
  "attention.self.key": "attn_k",
  "attention.self.value": "attn_v",
  "attention.output.dense": "attn_output",
  "attention.output.LayerNorm": "attn_output_norm",
  "intermediate.dense": "ffn_up",
  "output.dense": "ffn_down",
  "output.LayerNorm": "layer_output_norm",
};
const GLOBAL_TENSORS: Record<string, string> = {
  "embeddings.word_embeddings": "token_embd",
  "embeddings.token_type_embeddings": "token_types",
  "embeddings.position_embeddings": "position_embd",
  "embeddings.LayerNorm": "token_embd_norm",
};
/** Not used for embeddings: dropped, as the converter drops them. */
const DROPPED = /^(embeddings\.position_ids|pooler\.dense\.(weight|bias)|cls\..*)$/;

export function ggufTensorName(hfName: string): string | null {
  const name = hfName
    .replace(/^bert\./, "")
    .replace(/\.gamma$/, ".weight")
    .replace(/\.beta$/, ".bias");
  if (DROPPED.test(name)) return null;
  const suffix = name.endsWith(".weight") ? "weight" : name.endsWith(".bias") ? "bias" : null;
  if (!suffix) throw new Error(`unexpected BERT tensor ${hfName}`);
  const stem = name.slice(0, -suffix.length - 1);
  if (GLOBAL_TENSORS[stem]) return `${GLOBAL_TENSORS[stem]}.${suffix}`;
  const layer = /^encoder\.layer\.(\d+)\.(.+)$/.exec(stem);
  if (layer && LAYER_TENSORS[layer[2]!]) return `blk.${layer[1]}.${LAYER_TENSORS[layer[2]!]}.${suffix}`;
  throw new Error(`unexpected BERT tensor ${hfName}`);
}

/**
 * Q8_0's tensors kept in F16, by measurement (README, "Embeddings"): every matrix in Q8_0 ran 256 inputs
 * 1.5x faster than F32 but fell to cosine 0.9981 of the reference on 3-token inputs, mostly from the
 * 8-bit blocks llama.cpp quantizes the activations into before each Q8_0 product; these two products
 * (the values, and the FFN's first matrix) bring it back over the 0.9995 floor.
 */
export const Q8_0_KEPT_F16 = /^blk\.\d+\.(attn_v|ffn_up)\.weight$/;

/** A precision's tensor layout as the converted file's manifest names it: a changed rule converts again. */
export function conversionLayout(precision: BertPrecision): string {
  return precision === "q8_0" ? `q8_0+f16:${Q8_0_KEPT_F16.source}+f32:token_embd` : precision;
}

/**
 * As the converter decides: 1-D tensors, norms, position and token-type embeddings stay F32; the rest
 * take the precision, where `q8_0` keeps the tensors `keptF16` matches in F16 and the token embeddings
 * in F32 (read a row a token, they cost no time; in F16 they took 4e-5 off the worst input's cosine,
 * half the margin over the floor).
 */
function storedType(name: string, shape: number[], precision: BertPrecision, keptF16: RegExp): number {
  if (precision === "f32" || shape.length <= 1 || name.endsWith("_norm.weight") || !name.endsWith(".weight")) return GgmlType.F32;
  if (name.startsWith("position_embd.") || name.startsWith("token_types.")) return GgmlType.F32;
  if (precision === "q8_0" && name.startsWith("token_embd.")) return GgmlType.F32;
  // Q8_0 blocks never straddle rows: a row whose length is not a multiple of a block stays F16.
  if (precision === "bf16") return GgmlType.BF16;
  const rowLength = shape.at(-1)!;
  return precision === "f16" || keptF16.test(name) || rowLength % Q8_0_BLOCK_VALUES !== 0 ? GgmlType.F16 : GgmlType.Q8_0;
}

const floats = (data: Buffer) => new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));

function toF16(data: Buffer): Buffer {
  const values = floats(data);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = floatToHalfBits(values[i]!);
  return Buffer.from(out.buffer);
}

/** bfloat16: a float32's upper half, rounded to nearest even (what ggml and PyTorch do; no NaN in weights). */
function toBF16(data: Buffer): Buffer {
  const bits = new Uint32Array(floats(data).buffer);
  const out = new Uint16Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = (bits[i]! + 0x7fff + ((bits[i]! >>> 16) & 1)) >>> 16;
  return Buffer.from(out.buffer);
}

function convertTensor(hfName: string, tensor: SafeTensor, precision: BertPrecision, keptF16: RegExp): GgufTensor | null {
  const name = ggufTensorName(hfName);
  if (!name) return null;
  if (tensor.dtype !== "F32") throw new Error(`tensor ${hfName} is ${tensor.dtype}; only F32 sources are converted`);
  const type = storedType(name, tensor.shape, precision, keptF16);
  const convert: Record<number, (data: Buffer) => Buffer> = {
    [GgmlType.F16]: toF16,
    [GgmlType.BF16]: toBF16,
    [GgmlType.Q8_0]: (data) => quantizeQ8_0(floats(data)),
  };
  const data = convert[type]?.(tensor.data) ?? Buffer.from(tensor.data);
  return { name, dims: [...tensor.shape].reverse(), type, data };
}

/** The vocabulary by id, with gguf-py's token types and the phantom-space form llama.cpp's WPM tokenizer reads. */
export function bertVocabulary(tokenizer: TokenizerJson): { tokens: string[]; types: number[] } {
  if (tokenizer.model.type !== "WordPiece") throw new Error(`tokenizer.json's model is ${tokenizer.model.type}, not WordPiece`);
  const tokens: string[] = [];
  for (const [text, id] of Object.entries(tokenizer.model.vocab)) tokens[id] = text;
  for (const added of tokenizer.added_tokens) tokens[added.id] = added.content;
  const control = new Set(tokenizer.added_tokens.filter((t) => t.special).map((t) => t.id));
  const types: number[] = [];
  for (let id = 0; id < tokens.length; id++) {
    if (tokens[id] === undefined) throw new Error(`tokenizer.json's vocabulary has no token with id ${id}`);
    types.push(control.has(id) ? TOKEN_CONTROL : TOKEN_NORMAL);
    if (!control.has(id)) tokens[id] = tokens[id]!.startsWith("##") ? tokens[id]!.slice(2) : `\u2581${tokens[id]}`;
  }
  return { tokens, types };
}

function specialTokenIds(tokenizer: TokenizerJson): Array<[string, GgufValue]> {
  const idOf = (content: string) => tokenizer.added_tokens.find((t) => t.content === content)?.id ?? tokenizer.model.vocab[content];
  const keys: Array<[string, string]> = [
    ["unknown_token_id", "[UNK]"],
    ["seperator_token_id", "[SEP]"], // sic: llama.cpp's key
    ["padding_token_id", "[PAD]"],
    ["cls_token_id", "[CLS]"],
    ["mask_token_id", "[MASK]"],
  ];
  return keys.flatMap(([key, content]) =>
    idOf(content) === undefined ? [] : [[`tokenizer.ggml.${key}`, { u32: idOf(content)! }] as [string, GgufValue]],
  );
}

function hparam(config: Record<string, unknown>, key: string): number {
  const value = config[key];
  if (typeof value !== "number") throw new Error(`config.json has no number ${key}`);
  return value;
}

export function bertMetadata(model: SentenceTransformersModel, name: string, precision: BertPrecision): Array<[string, GgufValue]> {
  const { config, tokenizer } = model;
  if (config.model_type !== "bert") throw new Error(`config.json's model_type is ${String(config.model_type)}, not bert`);
  const vocabulary = bertVocabulary(tokenizer);
  const lowercase = tokenizer.normalizer?.lowercase ?? true;
  return [
    ["general.architecture", { str: "bert" }],
    ["general.type", { str: "model" }],
    ["general.name", { str: name }],
    ["general.file_type", { u32: FILE_TYPE[precision] }],
    ["bert.block_count", { u32: hparam(config, "num_hidden_layers") }],
    ["bert.context_length", { u32: hparam(config, "max_position_embeddings") }],
    ["bert.embedding_length", { u32: hparam(config, "hidden_size") }],
    ["bert.feed_forward_length", { u32: hparam(config, "intermediate_size") }],
    ["bert.attention.head_count", { u32: hparam(config, "num_attention_heads") }],
    ["bert.attention.layer_norm_epsilon", { f32: hparam(config, "layer_norm_eps") }],
    ["bert.attention.causal", { bool: false }],
    ["bert.pooling_type", { u32: POOLING_TYPE[model.pooling] }],
    ["tokenizer.ggml.token_type_count", { u32: typeof config.type_vocab_size === "number" ? config.type_vocab_size : 1 }],
    ["tokenizer.ggml.model", { str: "bert" }],
    // The name convert_hf_to_gguf.py gives this tokenizer family (bge-small's); WordPiece ignores it.
    ["tokenizer.ggml.pre", { str: "bert-bge" }],
    ["tokenizer.ggml.tokens", { strings: vocabulary.tokens }],
    ["tokenizer.ggml.token_type", { i32s: vocabulary.types }],
    ...specialTokenIds(tokenizer),
    ["tokenizer.ggml.normalizer.lowercase", { bool: lowercase }],
    // Hugging Face's BertNormalizer strips accents when strip_accents is null and lowercase is on.
    ["tokenizer.ggml.normalizer.strip_accents", { bool: tokenizer.normalizer?.strip_accents ?? lowercase }],
  ];
}

/**
 * Writes the GGUF; returns its size, sha256 and tensor count. `keptF16` replaces Q8_0's choice of F16
 * tensors: for bench/embedding-formats.ts, which measures the candidates.
 */
export async function writeBertGguf(
  model: SentenceTransformersModel,
  path: string,
  name: string,
  precision: BertPrecision,
  keptF16 = Q8_0_KEPT_F16,
): Promise<{ bytes: number; sha256: string; tensors: number }> {
  const tensors = [...model.tensors].flatMap(([hfName, tensor]) => convertTensor(hfName, tensor, precision, keptF16) ?? []);
  const order = (n: string) => (n.startsWith("blk.") ? 1 : 0);
  tensors.sort((a, b) => order(a.name) - order(b.name) || a.name.localeCompare(b.name, "en", { numeric: true }));
  const written = await writeGguf(path, bertMetadata(model, name, precision), tensors);
  return { ...written, tensors: tensors.length };
}
