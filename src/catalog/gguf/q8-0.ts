/**
 * ggml's Q8_0 by hand, as `quantize_row_q8_0_ref` writes it: blocks of 32 values, each one half
 * precision scale d = max|x| / 127 and 32 signed bytes round(x / d). Every step is rounded to float32
 * as the C code computes it, so a tensor quantized here is byte for byte what llama-quantize writes.
 */
import { floatToHalfBits } from "./half.js";

export const Q8_0_BLOCK_VALUES = 32;
const BLOCK_BYTES = 2 + Q8_0_BLOCK_VALUES;

/** C's `roundf`: halves away from zero (Math.round takes them towards +∞). */
const roundAwayFromZero = (x: number) => (x < 0 ? -Math.round(-x) : Math.round(x));

export function quantizeQ8_0(values: Float32Array): Buffer {
  if (values.length % Q8_0_BLOCK_VALUES !== 0)
    throw new Error(`Q8_0 needs rows of a multiple of ${Q8_0_BLOCK_VALUES} values, not ${values.length}`);
  const out = Buffer.alloc((values.length / Q8_0_BLOCK_VALUES) * BLOCK_BYTES);
  for (let block = 0, at = 0; at < values.length; block++, at += Q8_0_BLOCK_VALUES) {
    let amax = 0;
    for (let j = 0; j < Q8_0_BLOCK_VALUES; j++) amax = Math.max(amax, Math.abs(values[at + j]!));
    const d = Math.fround(amax / 127);
    const inverse = d ? Math.fround(1 / d) : 0;
    const base = block * BLOCK_BYTES;
    out.writeUInt16LE(floatToHalfBits(d), base);
    for (let j = 0; j < Q8_0_BLOCK_VALUES; j++) out.writeInt8(roundAwayFromZero(Math.fround(values[at + j]! * inverse)), base + 2 + j);
  }
  return out;
}
