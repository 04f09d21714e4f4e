/**
 * Where a prompt may be cut into pieces that tokenize, one by one, exactly as the whole would.
 *
 * llama.cpp finds the special tokens written in a prompt (`<|im_start|>`; in Gemma's vocabulary
 * also newlines and runs of spaces) before it tokenizes the text between them, and each match
 * walks its list of fragments from the start (`std::next(buffer.begin(), source - 1)` in
 * `tokenizer_st_partition`): the time grows with the square of the matches. A conversation of
 * 10,000 one-word messages (60,000 tokens) took 3.5 s to tokenize, 100,000 messages minutes.
 * Tokenized in pieces of a bounded number of matches, the same prompt costs time in proportion
 * to its length.
 *
 * A cut is exact when llama.cpp's own partition of the whole text has a fragment boundary there:
 * a special token starts at the cut, no special text spans it, and none starts inside the token
 * found there (so that token, or another starting at the cut, is the one llama.cpp matches). The
 * text between special tokens is tokenized fragment by fragment in any case, so nothing else
 * depends on what lies across the cut. Tokens that strip the spaces beside them (LSTRIP/RSTRIP)
 * could reach across it, so where the vocabulary has any, a cut also needs no space on either side.
 */
export interface SpecialText {
  /** The token's text as UTF-8, as the prompt would spell it. */
  bytes: Uint8Array;
  /** The token strips spaces to its left or right. */
  stripsSpaces: boolean;
}

/** Matches found before a piece may end; small enough that the square stays cheap. */
const MATCHES_PER_PIECE = 64;

export class SpecialTextSplitter {
  /** A byte trie: `children[node]` maps a byte to the next node; `ends[node]` marks a whole text. */
  private readonly children: Map<number, number>[] = [new Map()];
  private readonly ends: boolean[] = [false];
  private readonly longest: number;
  private readonly anyStrips: boolean;

  constructor(texts: readonly SpecialText[]) {
    let longest = 0;
    for (const { bytes } of texts) {
      if (bytes.length === 0) continue;
      let node = 0;
      for (const byte of bytes) {
        let next = this.children[node]!.get(byte);
        if (next === undefined) {
          next = this.children.push(new Map()) - 1;
          this.ends.push(false);
          this.children[node]!.set(byte, next);
        }
        node = next;
      }
      this.ends[node] = true;
      longest = Math.max(longest, bytes.length);
    }
    this.longest = longest;
    this.anyStrips = texts.some((t) => t.stripsSpaces);
  }

  /** Byte offsets where the text may be cut (ascending, none at 0 or the end). */
  cuts(text: Uint8Array, matchesPerPiece = MATCHES_PER_PIECE): number[] {
    const cuts: number[] = [];
    const root = this.children[0]!;
    let matches = 0;
    for (let at = 0; at < text.length;) {
      if (!root.has(text[at]!)) {
        at++;
        continue;
      }
      const length = this.longestAt(text, at);
      if (length === 0) {
        at++;
        continue;
      }
      if (matches >= matchesPerPiece && at > 0 && this.exactCut(text, at, length)) {
        cuts.push(at);
        matches = 0;
      }
      matches++;
      at += length;
    }
    return cuts;
  }

  /** The length of the longest special text that starts at `at` (0: none). */
  longestAt(text: Uint8Array, at: number): number {
    let node = 0;
    let found = 0;
    for (let i = at; i < text.length; i++) {
      const next = this.children[node]!.get(text[i]!);
      if (next === undefined) break;
      node = next;
      if (this.ends[node]) found = i - at + 1;
    }
    return found;
  }

  private exactCut(text: Uint8Array, at: number, length: number): boolean {
    for (let from = Math.max(0, at - this.longest + 1); from < at; from++) {
      if (from + this.longestAt(text, from) > at) return false;
    }
    for (let from = at + 1; from < at + length; from++) {
      if (this.longestAt(text, from) > 0) return false;
    }
    return !this.anyStrips || (!isSpace(text[at - 1]!) && !isSpace(text[at]!));
  }
}

/** C's isspace in the "C" locale, which llama.cpp uses for LSTRIP/RSTRIP. */
function isSpace(byte: number): boolean {
  return byte === 0x20 || (byte >= 0x09 && byte <= 0x0d);
}
