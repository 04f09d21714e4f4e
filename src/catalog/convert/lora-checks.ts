/**
 * An adapter's shapes against its base model's, checked before llama.cpp sees it: a LoRA for another
 * model is a clear error here, not garbage output (or llama.cpp's one-line refusal in the log).
 */
import { GgmlType, type GgufLayout } from "../gguf/layout.js";

/**
 * The largest scale (alpha / r, or alpha / sqrt(r) for rsLoRA) taken. Trained adapters scale by
 * about 0.5 to 4 (alpha from r to 2r), rsLoRA's by a few tens at most; far past that the update
 * swamps the base's weights and the model answers nothing ("", the probe's lora_alpha 1e308, which
 * is infinity in llama.cpp's f32 alpha).
 */
export const MAX_LORA_SCALE = 256;

/** One adapted matrix: its base tensor's GGUF name and the PyTorch-order shapes of A [r, in] and B [out, r]. */
export interface LoraPair {
  base: string;
  a?: { name: string; shape: number[] };
  b?: { name: string; shape: number[] };
}

/** Checks every pair against the base's tensors (ggml order: ne = [in, out]); `rank`: the config's r, if it says. */
export function checkLoraAgainstBase(pairs: readonly LoraPair[], base: GgufLayout, rank?: number): void {
  const tensors = new Map(base.tensors.map((t) => [t.name, t.dims.map(Number)]));
  for (const pair of pairs) {
    if (!pair.a || !pair.b)
      throw new Error(`the adapter has lora_${pair.a ? "A" : "B"} but not lora_${pair.a ? "B" : "A"} for ${pair.base}`);
    const dims = tensors.get(pair.base);
    if (!dims) throw new Error(`the adapter adapts ${pair.base}, which the base model does not have (another model's adapter?)`);
    const [rowsA, inA] = pair.a.shape;
    const [outB, colsB] = pair.b.shape;
    if (pair.a.shape.length !== 2 || pair.b.shape.length !== 2 || dims.length !== 2)
      throw new Error(`the adapter's tensors for ${pair.base} are not matrices`);
    if (rowsA !== colsB) throw new Error(`${pair.base}: lora_A has rank ${rowsA} but lora_B has rank ${colsB}`);
    if (rank !== undefined && rowsA !== rank) throw new Error(`${pair.base}: rank ${rowsA}, but adapter_config.json says r = ${rank}`);
    if (inA !== dims[0] || outB !== dims[1])
      throw new Error(
        `${pair.base}: the adapter maps ${inA} inputs to ${outB} outputs, the base model's matrix ${dims[0]} to ${dims[1]} (an adapter for another model?)`,
      );
  }
}

/** A GGUF given as an adapter: a LoRA (not a model), for the base's architecture, with shapes that fit it. */
export function checkGgufLora(adapter: GgufLayout, base: GgufLayout): void {
  const type = adapter.general["general.type"];
  if (type !== "adapter" || adapter.general["adapter.type"] !== "lora")
    throw new Error(
      `the GGUF is not a LoRA adapter (general.type ${type ?? "absent"}, adapter.type ${adapter.general["adapter.type"] ?? "absent"})`,
    );
  const [mine, theirs] = [adapter.general["general.architecture"], base.general["general.architecture"]];
  if (mine !== theirs) throw new Error(`the adapter is for the ${mine} architecture, the base model is ${theirs}`);
  const pairs = new Map<string, LoraPair>();
  for (const tensor of adapter.tensors) {
    const match = /^(.+)\.lora_([ab])$/.exec(tensor.name);
    if (!match) {
      if (tensor.name.endsWith("_norm.weight")) continue; // llama.cpp skips these
      throw new Error(`the adapter's tensor ${tensor.name} is neither a lora_a nor a lora_b`);
    }
    const pair = pairs.get(match[1]!) ?? { base: match[1]! };
    pair[match[2] as "a" | "b"] = { name: tensor.name, shape: tensor.dims.map(Number).reverse() };
    pairs.set(pair.base, pair);
  }
  if (pairs.size === 0) throw new Error("the adapter has no LoRA tensors");
  checkGgufAlpha(adapter.numbers["adapter.lora.alpha"], [...pairs.values()]);
  // token_embd's pair is stored the other way round (llama.cpp's llm_build_inp_embd); checked by llama.cpp itself.
  checkLoraAgainstBase(
    [...pairs.values()].filter((p) => !p.base.startsWith("token_embd.")),
    base,
  );
}

/** `adapter.lora.alpha` (absent or 0: llama.cpp scales by 1) finite, and alpha / r within MAX_LORA_SCALE for every pair. */
function checkGgufAlpha(alpha: number | undefined, pairs: readonly LoraPair[]): void {
  if (alpha === undefined || alpha === 0) return;
  if (!(Number.isFinite(alpha) && alpha > 0)) throw new Error(`the adapter's adapter.lora.alpha is ${alpha}, not a positive number`);
  const ranks = pairs.flatMap((pair) => (pair.a?.shape.length === 2 ? [pair.a.shape[0]!] : []));
  const scale = alpha / Math.max(1, Math.min(...ranks));
  if (scale > MAX_LORA_SCALE)
    throw new Error(
      `the adapter's adapter.lora.alpha ${alpha} scales the update by ${scale} (alpha / r); at most ${MAX_LORA_SCALE} is taken`,
    );
}

/** Bytes per block and elements per block of the tensor types a GGUF LoRA may hold (llama.cpp's convert_lora_to_gguf.py outtypes). */
const LORA_TENSOR_TYPES: Record<number, { name: string; blockBytes: number; blockElements: number }> = {
  [GgmlType.F32]: { name: "F32", blockBytes: 4, blockElements: 1 },
  [GgmlType.F16]: { name: "F16", blockBytes: 2, blockElements: 1 },
  [GgmlType.Q8_0]: { name: "Q8_0", blockBytes: 34, blockElements: 32 },
  30: { name: "BF16", blockBytes: 2, blockElements: 1 },
};

/**
 * Each tensor of a GGUF LoRA is of a type a LoRA is written in, and its data lies inside the file: an
 * uploaded file is checked here before llama.cpp's loader reads it.
 */
export function checkGgufTensorData(adapter: GgufLayout): void {
  const room = adapter.fileSize - adapter.dataStart;
  for (const tensor of adapter.tensors) {
    const type = LORA_TENSOR_TYPES[tensor.type];
    if (!type) throw new Error(`the adapter's tensor ${tensor.name} is of ggml type ${tensor.type}; F32, F16, BF16 and Q8_0 are accepted`);
    if (tensor.elements % type.blockElements !== 0)
      throw new Error(`the adapter's tensor ${tensor.name} has ${tensor.elements} values, not whole ${type.name} blocks`);
    const bytes = (tensor.elements / type.blockElements) * type.blockBytes;
    if (!Number.isSafeInteger(tensor.offset) || tensor.offset < 0 || tensor.offset + bytes > room)
      throw new Error(`the adapter's tensor ${tensor.name} lies outside the file (truncated?)`);
  }
}
