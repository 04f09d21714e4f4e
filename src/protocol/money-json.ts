/**
 * JSON with exact decimal numbers. Node 20 has no JSON.rawJSON, so `stringifyJson` lets the native
 * JSON.stringify do all the work, has a replacer turn each ExactDecimal into a sentinel string
 * "<marker><decimal>", then swaps every quoted sentinel for the bare decimal.
 *
 * The marker carries a 128-bit random per-process nonce, so user text cannot forge it; and should a
 * user string or key ever contain the marker anyway, the call is redone with a fresh nonce, so a user
 * string can never turn into a number.
 */
import BigModule from "big.js";

// An independent big.js constructor in strict mode: a JS number never becomes an exact decimal.
const Dec: BigModule.BigConstructor = BigModule();
Dec.strict = true;

/** JSON number grammar without an exponent: -?(0|[1-9]digits)(.digits)? */
const JSON_DECIMAL = /^-?(?:0|[1-9]\d*)(?:\.\d+)?$/;

/** A decimal that stringifyJson writes as a bare JSON number with exactly this text. */
export class ExactDecimal {
  constructor(readonly text: string) {
    if (typeof text !== "string" || !JSON_DECIMAL.test(text)) {
      throw new TypeError(`ExactDecimal needs a plain decimal string, got ${JSON.stringify(text)}`);
    }
  }

  /** From any plain decimal string (e.g. "2.30", "007"), normalised: no exponent, trailing zeros trimmed. */
  static of(value: string): ExactDecimal {
    if (typeof value !== "string" || !/^-?\d+(?:\.\d+)?$/.test(value)) {
      throw new TypeError(`ExactDecimal.of needs a plain decimal string, got ${JSON.stringify(value)}`);
    }
    return new ExactDecimal(Dec(value).toFixed());
  }

  toString(): string {
    return this.text;
  }

  /**
   * Plain JSON.stringify (not stringifyJson) writes the exact text as a *string*: exact, but the
   * wrong JSON type, so always use stringifyJson for the wire.
   */
  toJSON(): string {
    return this.text;
  }
}

let marker = newMarker();

function newMarker(): string {
  // Only characters JSON.stringify leaves unescaped, so the sentinel's quoted form is predictable.
  // globalThis.crypto (Web Crypto) is built into Node 20.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let hex = "";
  for (const b of bytes) hex += b.toString(16).padStart(2, "0");
  return `~xd:${hex}:`;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

let pattern = new RegExp(`"${escapeRegExp(marker)}(-?[0-9.]+)"`, "g");

/**
 * Like JSON.stringify(value, null, space), except that ExactDecimal instances are written as bare
 * numbers with their exact text (e.g. 0.000004312, never 4.312e-6). Throws TypeError when the value
 * itself is not serialisable (undefined, a function, a symbol), where JSON.stringify returns undefined.
 */
export function stringifyJson(value: unknown, space?: string | number): string {
  for (;;) {
    const m = marker;
    let decimals = 0;
    let collision = false;
    const replacer = function (this: unknown, key: string, v: unknown): unknown {
      if (typeof v === "string") {
        // ExactDecimal.toJSON has already turned it into its text; the holder still has the instance.
        const original = (this as Record<string, unknown>)[key];
        if (original instanceof ExactDecimal) {
          decimals++;
          return m + original.text;
        }
        if (v.includes(m)) collision = true;
      }
      if (key.includes(m)) collision = true;
      return v;
    };
    const out = JSON.stringify(value, replacer, space) as string | undefined;
    if (out === undefined) throw new TypeError("value is not JSON-serialisable");
    if (collision) {
      // Practically unreachable: someone's text contains this process's nonce. Rotate and redo.
      marker = newMarker();
      pattern = new RegExp(`"${escapeRegExp(marker)}(-?[0-9.]+)"`, "g");
      continue;
    }
    if (decimals === 0) return out;
    pattern.lastIndex = 0;
    return out.replace(pattern, "$1");
  }
}
