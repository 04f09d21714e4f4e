/**
 * IEEE 754 half precision by hand: Node 20 has no Float16Array. Rounds to nearest, ties to even, as
 * ggml's own conversion does, so a value converted here is bit-for-bit what llama.cpp would store.
 */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function floatToHalfBits(value: number): number {
  f32[0] = value;
  const bits = u32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    if (halfExponent < -10) return sign;
    // Subnormal half: the implicit leading 1 becomes explicit and shifts right with the rest.
    const full = mantissa | 0x800000;
    const shift = 14 - halfExponent;
    return sign | roundShift(full, shift);
  }
  // A carry out of the mantissa bumps the exponent, which is exactly the right rounding.
  return sign | ((halfExponent << 10) + roundShift(mantissa, 13));
}

function roundShift(value: number, shift: number): number {
  const kept = value >>> shift;
  const rest = value & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  return rest > halfway || (rest === halfway && (kept & 1) === 1) ? kept + 1 : kept;
}

export function halfBitsToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}
