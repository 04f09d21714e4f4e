/**
 * A PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) to llama.cpp's GGUF LoRA, written
 * as llama.cpp's loader (src/llama-adapter.cpp) reads one: `general.type` "adapter", `adapter.type`
 * "lora", `adapter.lora.alpha`, the base's `general.architecture`, and a pair of tensors per adapted
 * matrix, `<base tensor>.lora_a` and `.lora_b`. The orientation needs no transpose: llama.cpp wants
 * lora_a with ne = [in, r] and lora_b with ne = [r, out], which are PEFT's lora_A [r, in] and lora_B
 * [out, r] with the dimensions read fastest first. It scales B·A by alpha / r, as PEFT does.
 *
 * For `llama`, Hugging Face's q_proj and k_proj rows are permuted when the base model is converted
 * (its rotary halves become adjacent pairs, llama.cpp's "normal" RoPE); the same permutation is
 * applied to lora_B's rows here, or the update would land on the wrong rows.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { GgmlType, type GgufLayout } from "../gguf/layout.js";
import { writeGguf, type GgufTensor } from "../gguf/writer.js";
import { readSafetensors, type SafeTensor } from "./safetensors.js";
import { checkLoraAgainstBase, MAX_LORA_SCALE, type LoraPair } from "./lora-checks.js";

/** Hugging Face's Llama/Qwen2 linear layers and llama.cpp's names for their weights. */
const MODULES: Record<string, string> = {
  "self_attn.q_proj": "attn_q",
  "self_attn.k_proj": "attn_k",
  "self_attn.v_proj": "attn_v",
  "self_attn.o_proj": "attn_output",
  "mlp.gate_proj": "ffn_gate",
  "mlp.up_proj": "ffn_up",
  "mlp.down_proj": "ffn_down",
};
/** Architectures whose conversion keeps Hugging Face's tensor names as above; `permuted`: q/k rows reordered. */
const ARCHITECTURES: Record<string, { permuted: boolean }> = { llama: { permuted: true }, qwen2: { permuted: false } };

export interface PeftConfig {
  peft_type?: string;
  base_model_name_or_path?: string;
  r?: number;
  lora_alpha?: number;
  bias?: string;
  fan_in_fan_out?: boolean;
  use_dora?: boolean;
  use_rslora?: boolean;
  rank_pattern?: Record<string, unknown>;
  alpha_pattern?: Record<string, unknown>;
  modules_to_save?: unknown[] | null;
}

/** A fault of adapter_config.json (not of the weights): an upload's refusal names that file. */
export class AdapterConfigError extends Error {}

/** adapter_config.json's text as a config object; anything else is refused naming the file. */
export function parsePeftConfig(text: string): PeftConfig {
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new AdapterConfigError(`adapter_config.json is not JSON (${(error as Error).message})`);
  }
  if (typeof config !== "object" || config === null || Array.isArray(config))
    throw new AdapterConfigError("adapter_config.json is not a JSON object");
  return config as PeftConfig;
}

/** The adapter's alpha as llama.cpp reads it (scale = alpha / r); refuses what a plain LoRA cannot express. */
export function loraAlpha(config: PeftConfig): number {
  if ((config.peft_type ?? "LORA").toUpperCase() !== "LORA")
    throw new AdapterConfigError(`adapter_config.json's peft_type is ${config.peft_type}, not LORA`);
  const { r, lora_alpha: alpha } = config;
  if (!Number.isSafeInteger(r) || !(r! > 0)) throw new AdapterConfigError("adapter_config.json has no positive whole rank r");
  if (typeof alpha !== "number" || !(alpha > 0)) throw new AdapterConfigError("adapter_config.json has no positive lora_alpha");
  const scale = config.use_rslora ? alpha / Math.sqrt(r!) : alpha / r!;
  if (!(scale <= MAX_LORA_SCALE))
    throw new AdapterConfigError(
      `adapter_config.json's lora_alpha ${alpha} scales the update by ${scale} (alpha / ${config.use_rslora ? "sqrt(r)" : "r"}); at most ${MAX_LORA_SCALE} is taken`,
    );
  const refuse = (what: string) => {
    throw new AdapterConfigError(`adapter_config.json uses ${what}, which llama.cpp's LoRA cannot apply`);
  };
  if (config.use_dora) refuse("DoRA (use_dora)");
  if (config.bias !== undefined && config.bias !== "none") refuse(`bias "${config.bias}"`);
  if (config.fan_in_fan_out) refuse("fan_in_fan_out");
  if (Object.keys(config.rank_pattern ?? {}).length > 0) refuse("a rank_pattern");
  if (Object.keys(config.alpha_pattern ?? {}).length > 0) refuse("an alpha_pattern");
  if ((config.modules_to_save ?? []).length > 0) refuse("modules_to_save (whole layers trained)");
  // rsLoRA scales by alpha / sqrt(r): the same scale under llama.cpp's alpha / r.
  return config.use_rslora ? alpha * Math.sqrt(r!) : alpha;
}

/** `base_model_name_or_path` must name the base: its catalog id, or a path ending in the id's model name. */
export function checkBaseName(config: PeftConfig, baseId: string): void {
  const named = config.base_model_name_or_path;
  if (typeof named !== "string" || named === "")
    throw new AdapterConfigError(
      `adapter_config.json does not name the model the adapter was trained on (base_model_name_or_path); it must name '${baseId}'`,
    );
  const modelName = baseId.split("/").pop()!.toLowerCase();
  const given = named.replace(/\/+$/, "").toLowerCase();
  if (given === baseId.toLowerCase() || given.split("/").pop() === modelName) return;
  throw new AdapterConfigError(`the adapter was trained on '${named}' (base_model_name_or_path), not on '${baseId}'`);
}

/** `base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight` -> `blk.3.attn_q.weight` and `a`. */
export function loraTensorName(peftName: string): { base: string; side: "a" | "b"; module: string } {
  const match = /^(?:base_model\.model\.)?model\.layers\.(\d+)\.(.+)\.lora_([AB])(?:\.[A-Za-z0-9_-]+)?\.weight$/.exec(peftName);
  const gguf = match ? MODULES[match[2]!] : undefined;
  if (!match || !gguf)
    throw new Error(`adapter tensor ${peftName} adapts no layer llama.cpp can apply a LoRA to (attention and MLP projections)`);
  return { base: `blk.${match[1]}.${gguf}.weight`, side: match[3] === "A" ? "a" : "b", module: gguf };
}

/** A safetensors tensor's values as float32 (F32, F16 and BF16 sources); every one must be a finite number. */
export function toFloat32(tensor: SafeTensor, name: string): Float32Array {
  const values = widened(tensor, name);
  // A NaN or an infinity anywhere spreads through B·A into every output of the layer: the model answers "".
  const bad = values.findIndex((value) => !Number.isFinite(value));
  if (bad !== -1) throw new Error(`adapter tensor ${name} holds ${values[bad]} (at index ${bad}): every value must be a finite number`);
  return values;
}

function widened(tensor: SafeTensor, name: string): Float32Array {
  const count = tensor.shape.reduce((a, b) => a * b, 1);
  const size = tensor.dtype === "F32" ? 4 : 2;
  if (tensor.data.byteLength !== count * size)
    throw new Error(`adapter tensor ${name} is [${tensor.shape.join(", ")}] ${tensor.dtype} but holds ${tensor.data.byteLength} bytes`);
  const bytes = Buffer.from(tensor.data); // aligned copy
  if (tensor.dtype === "F32") return new Float32Array(bytes.buffer, bytes.byteOffset, count);
  const halves = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
  const out = new Float32Array(count);
  const view = new DataView(new ArrayBuffer(4));
  for (let i = 0; i < count; i++) {
    if (tensor.dtype === "BF16") view.setUint32(0, halves[i]! << 16);
    else if (tensor.dtype === "F16") view.setFloat32(0, halfToFloat(halves[i]!));
    else throw new Error(`adapter tensor ${name} is ${tensor.dtype}; F32, F16 and BF16 are converted`);
    out[i] = view.getFloat32(0);
  }
  return out;
}

function halfToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/**
 * Reorders rows as llama.cpp's Llama conversion does: per head, the rows of its two rotary halves
 * interleaved (row h·D + 2j + s takes row h·D + s·D/2 + j).
 */
export function permuteRows(values: Float32Array, rows: number, columns: number, heads: number): Float32Array {
  const headDim = rows / heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) throw new Error(`cannot split ${rows} rows into ${heads} heads of rotary pairs`);
  const out = new Float32Array(values.length);
  for (let h = 0; h < heads; h++)
    for (let j = 0; j < headDim / 2; j++)
      for (let s = 0; s < 2; s++) {
        const to = (h * headDim + 2 * j + s) * columns;
        const from = (h * headDim + s * (headDim / 2) + j) * columns;
        out.set(values.subarray(from, from + columns), to);
      }
  return out;
}

/** Pairs the adapter's tensors by the base tensor they adapt. */
function pairTensors(tensors: Map<string, SafeTensor>): Map<string, LoraPair & { module: string }> {
  const pairs = new Map<string, LoraPair & { module: string }>();
  for (const [name, tensor] of tensors) {
    const { base, side, module } = loraTensorName(name);
    const pair = pairs.get(base) ?? { base, module };
    if (pair[side]) throw new Error(`adapter has two lora_${side.toUpperCase()} tensors for ${base}`);
    pair[side] = { name, shape: tensor.shape };
    pairs.set(base, pair);
  }
  return pairs;
}

/** Converts the adapter folder against the base's GGUF layout; returns the GGUF's size and hash. */
export async function writePeftLoraGguf(
  dir: string,
  base: { id: string; layout: GgufLayout },
  outPath: string,
  name: string,
): Promise<{ bytes: number; sha256: string; tensors: number }> {
  const config = parsePeftConfig(await readFile(join(dir, "adapter_config.json"), "utf8"));
  const alpha = loraAlpha(config);
  checkBaseName(config, base.id);
  const architecture = base.layout.general["general.architecture"] ?? "";
  const arch = ARCHITECTURES[architecture];
  if (!arch)
    throw new Error(`PEFT adapters are converted for ${Object.keys(ARCHITECTURES).join(" and ")} models; the base is ${architecture}`);
  const tensors = readSafetensors(await readFile(join(dir, "adapter_model.safetensors")));
  if (tensors.size === 0) throw new Error("adapter_model.safetensors holds no tensors");
  const pairs = pairTensors(tensors);
  checkLoraAgainstBase([...pairs.values()], base.layout, config.r);
  const heads = (key: string) => base.layout.numbers[`${architecture}.attention.${key}`];
  const out: GgufTensor[] = [];
  for (const pair of pairs.values()) {
    for (const side of ["a", "b"] as const) {
      const { name: peftName, shape } = pair[side]!;
      let values = toFloat32(tensors.get(peftName)!, peftName);
      const headCount = pair.module === "attn_q" ? heads("head_count") : pair.module === "attn_k" ? heads("head_count_kv") : undefined;
      if (arch.permuted && side === "b" && headCount) values = permuteRows(values, shape[0]!, shape[1]!, headCount);
      out.push({
        name: `${pair.base}.lora_${side}`,
        dims: [...shape].reverse(),
        type: GgmlType.F32,
        data: Buffer.from(values.buffer, values.byteOffset, values.byteLength),
      });
    }
  }
  out.sort((x, y) => x.name.localeCompare(y.name, "en", { numeric: true }));
  const metadata: Parameters<typeof writeGguf>[1] = [
    ["general.architecture", { str: architecture }],
    ["general.type", { str: "adapter" }],
    ["general.name", { str: name }],
    ["adapter.type", { str: "lora" }],
    ["adapter.lora.alpha", { f32: alpha }],
  ];
  const written = await writeGguf(outPath, metadata, out);
  return { ...written, tensors: out.length };
}
