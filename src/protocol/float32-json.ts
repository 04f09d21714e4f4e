/**
 * A float32 vector as a JSON array of numbers, written as ASCII bytes: each value in at most nine
 * significant digits (FLT_DECIMAL_DIG), trailing zeros dropped, which a JSON parser reads back as a
 * double that rounds (Math.fround) to exactly the float32 written. JavaScript's own number text
 * widens a float32 to a double first and so writes up to 17 digits (0.1f as 0.10000000149011612):
 * twice the bytes for no more information, and V8's shortest-double search is the costliest part
 * of an embeddings answer. llama-server writes float32 the same way (nlohmann's shortest float).
 *
 * Nine digits always identify a float32: the decimal is within half a unit of its ninth digit
 * (5e-9 of the value, the product below adding ~1e-16), and float32 values lie at least 2^-24 of
 * the value apart, so the nearest float32 to the decimal is the one written. A non-finite value,
 * never in a unit vector, is written as JSON.stringify writes it: null.
 */

/** The most bytes one value takes ("-0.00000123456789"), with its comma. */
export const MAX_FLOAT32_JSON_BYTES = 18;

/** Bytes a vector of `length` values may take: every value at its longest, the brackets. */
export function float32JsonCapacity(length: number): number {
  return length * MAX_FLOAT32_JSON_BYTES + 2;
}

// 10^k for k in -60..60, each the double nearest the power (as the literal 1eK is read).
const POW10 = Array.from({ length: 121 }, (_, i) => Number(`1e${i - 60}`));
const pow10 = (k: number) => POW10[k + 60]!;
const ZERO = 0x30;
const DIGITS = new Uint8Array(9);

/** Writes `[v0,v1,...]` into `out` from `at`; returns where it ended. `out` must hold float32JsonCapacity(vector.length) from `at`. */
export function writeFloat32Json(vector: Float32Array, out: Uint8Array, at: number): number {
  out[at++] = 0x5b; // [
  for (let i = 0; i < vector.length; i++) {
    if (i > 0) out[at++] = 0x2c; // ,
    at = writeFloat32(vector[i]!, out, at);
  }
  out[at++] = 0x5d; // ]
  return at;
}

/** The vector's JSON text (writeFloat32Json into a buffer of its own). */
export function float32JsonText(vector: Float32Array): string {
  const bytes = Buffer.allocUnsafe(float32JsonCapacity(vector.length));
  return bytes.toString("latin1", 0, writeFloat32Json(vector, bytes, 0));
}

function writeFloat32(value: number, out: Uint8Array, at: number): number {
  if (value === 0) {
    out[at] = ZERO; // -0 too, as JSON.stringify writes it
    return at + 1;
  }
  if (!Number.isFinite(value)) {
    out.set(NULL, at);
    return at + 4;
  }
  if (value < 0) {
    out[at++] = 0x2d; // -
    value = -value;
  }
  // value = mantissa × 10^(exponent - 8), mantissa of nine digits. The exponent is found by
  // comparison (a unit vector's values take one to three), faster than Math.log10; it may miss by
  // one where the value rounds up to the next power of ten, which the checks below mend.
  let exponent = value < 1 ? -1 : 0;
  if (value < 1) while (exponent > -60 && value < pow10(exponent)) exponent--;
  else while (exponent < 60 && value >= pow10(exponent + 1)) exponent++;
  let mantissa = Math.round(value * pow10(8 - exponent));
  if (mantissa >= 1e9) mantissa = Math.round(value * pow10(8 - ++exponent));
  else if (mantissa < 1e8) mantissa = Math.round(value * pow10(8 - --exponent));
  if (mantissa >= 1e9) {
    mantissa = 1e8; // 9.999999996 rounded up to 10.0000000
    exponent++;
  }
  let m = mantissa | 0; // under 1e9: integer arithmetic from here
  let digits = 9;
  while (m % 10 === 0) {
    m = (m / 10) | 0;
    digits--;
  }
  for (let d = digits - 1; d >= 0; d--) {
    const rest = (m / 10) | 0;
    DIGITS[d] = ZERO + m - rest * 10;
    m = rest;
  }
  return exponent >= -6 && exponent < 9 ? writeFixed(out, at, digits, exponent) : writeScientific(out, at, digits, exponent);
}

const NULL = Uint8Array.from([0x6e, 0x75, 0x6c, 0x6c]);

/** 0.000ddd, d.ddd or ddd00: from 1e-6 (as JavaScript) up to 1e9 (where JavaScript goes on to 1e21). */
function writeFixed(out: Uint8Array, at: number, digits: number, exponent: number): number {
  if (exponent < 0) {
    out[at++] = ZERO;
    out[at++] = 0x2e; // .
    for (let z = -1; z > exponent; z--) out[at++] = ZERO;
    for (let d = 0; d < digits; d++) out[at++] = DIGITS[d]!;
    return at;
  }
  for (let d = 0; d <= exponent; d++) out[at++] = d < digits ? DIGITS[d]! : ZERO;
  if (digits > exponent + 1) {
    out[at++] = 0x2e;
    for (let d = exponent + 1; d < digits; d++) out[at++] = DIGITS[d]!;
  }
  return at;
}

/** d.ddde-N or de+N. */
function writeScientific(out: Uint8Array, at: number, digits: number, exponent: number): number {
  out[at++] = DIGITS[0]!;
  if (digits > 1) {
    out[at++] = 0x2e;
    for (let d = 1; d < digits; d++) out[at++] = DIGITS[d]!;
  }
  out[at++] = 0x65; // e
  out[at++] = exponent < 0 ? 0x2d : 0x2b;
  const magnitude = Math.abs(exponent);
  if (magnitude >= 10) out[at++] = ZERO + Math.floor(magnitude / 10);
  out[at++] = ZERO + (magnitude % 10);
  return at;
}
