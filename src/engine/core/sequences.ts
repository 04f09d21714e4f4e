import type { MemoryOp } from "../runner/step-protocol.js";
import type { Token } from "../types.js";

interface Sequence {
  readonly id: number;
  busy: boolean;
  /** Whose prompts may reuse the cells it keeps while idle; undefined: nobody's. */
  namespace: string | undefined;
  /** The tokens its cells hold, position by position. */
  held: Token[];
  /** How many of `held`'s leading tokens were its last request's prompt (the rest it generated). */
  heldPrompt: number;
  lastUsed: number;
}

/**
 * Cached prompt tokens a take keeps by using a spare sequence rather than cutting a cached prompt
 * short. Only prompt tokens count: what a request generated after its prompt is worth keeping for
 * its conversation's next turn, which extends it and matches it whole; a request that repeats the
 * whole prompt (a retry, a regenerate) is another answer to it, and the old answer is given up. When
 * generated tokens counted, every repeated prompt was copied away from its own cache into the least
 * recently used sequence, throwing that one's prompt away, and the next repeat recomputed it: 16
 * clients resending 16 cached prompts ran at 0.62x (issue 56).
 */
const KEEP_MIN_TOKENS = 64;
/**
 * The shortest shared prefix worth a copy between sequences. llama.cpp copies a KV stream whole,
 * every cell of it (47 MB for SmolLM2 at 2,048 cells, 190 MB at 8,192), so the copy's cost grows
 * with the stream, not with the prefix. Measured (2026-11-28, AMD EPYC zen4, 2 threads, SmolLM2,
 * 2,048 cells): the copy cost less than three prompt tokens' prefill (2 ms each), and copying a
 * 30-token system prompt and preamble took a 152-token prompt's TTFT p50 from 337 to 272-284 ms,
 * level with llama-server's slot reuse (266-277 ms). One token per 256 cells keeps a margin of
 * about three; never under 8 tokens.
 */
export function copyMinTokens(cellsPerSequence: number): number {
  return Math.max(8, Math.ceil(cellsPerSequence / 256));
}

export interface Taken {
  sequence: number;
  /** Leading tokens whose cells are already there. */
  reused: number;
}

/**
 * A shard's sequences (one KV stream of `cellsPerSequence` cells each) and the prefix cache over
 * them: an idle sequence keeps its cells for requests of the same namespace (the account), and a
 * request takes the idle sequence sharing the longest prefix with its tokens. Isolation is part of
 * the key: another namespace's cells are never matched, only cleared. Memory operations are
 * queued for the runner, which applies them before the next decode.
 */
export class SequenceTable {
  private readonly sequences: Sequence[];
  private readonly copyMin: number;
  private clock = 0;

  constructor(
    count: number,
    readonly cellsPerSequence: number,
    private readonly prefixCache: boolean,
  ) {
    this.sequences = Array.from({ length: count }, (_, id) => ({
      id,
      busy: false,
      namespace: undefined,
      held: [],
      heldPrompt: 0,
      lastUsed: 0,
    }));
    this.copyMin = copyMinTokens(cellsPerSequence);
  }

  get free(): number {
    return this.sequences.filter((s) => !s.busy).length;
  }

  get size(): number {
    return this.sequences.length;
  }

  /** Cells in use, by running and cached sequences alike. */
  usedCells(running: ReadonlyMap<number, number>): number {
    return this.sequences.reduce((sum, s) => sum + (s.busy ? (running.get(s.id) ?? 0) : s.held.length), 0);
  }

  /** The longest prefix of `tokens` an idle sequence of `namespace` holds (0 if none). */
  bestPrefix(namespace: string | undefined, tokens: readonly Token[]): number {
    let best = 0;
    for (const s of this.sequences) if (!s.busy) best = Math.max(best, this.match(s, namespace, tokens));
    return best;
  }

  /**
   * Takes an idle sequence: the best prefix match, else an empty one, else the least recently used.
   * Where the best match holds a longer cached prompt than the request shares with it (another
   * document after the same system prompt, say), taking it would throw that cache away: the shared
   * part is copied into a spare sequence instead (an empty one, else the least recently used), and
   * the cached one stays for its own next request. A request that shares the whole cached prompt
   * runs where it is cached (see KEEP_MIN_TOKENS). Where the match is not next to a running
   * sequence and another idle one is, the request runs there (its prefix copied, if long enough):
   * see `nextToBusy`.
   */
  take(namespace: string | undefined, tokens: readonly Token[], ops: MemoryOp[]): Taken {
    const idle = this.sequences.filter((s) => !s.busy);
    if (idle.length === 0) throw new Error("no idle sequence to take");
    let chosen = idle[0]!;
    let reused = -1;
    for (const s of idle) {
      const matched = this.match(s, namespace, tokens);
      const better =
        matched > reused ||
        (matched === reused && (s.held.length === 0 ? 0 : s.lastUsed) < (chosen.held.length === 0 ? 0 : chosen.lastUsed));
      if (better) [chosen, reused] = [s, matched];
    }
    // The last token is computed again: its logits are what the first sample needs.
    reused = Math.max(0, Math.min(reused, tokens.length - 1));
    const keep = reused > 0 && chosen.heldPrompt - reused >= KEEP_MIN_TOKENS;
    const spare = this.spare(idle, chosen);
    // Next to more running sequences, with no cache thrown away for it that taking `chosen` would
    // keep, and no reuse lost (a shorter shared prefix is not copied: its request would be billed
    // for tokens it had cached).
    const moves = reused === 0 || reused >= this.copyMin;
    const closer =
      spare &&
      moves &&
      this.nextToBusy(spare) > this.nextToBusy(chosen) &&
      (spare.held.length === 0 || (reused === 0 && chosen.held.length > 0));
    const placed = keep || closer ? spare : undefined;
    if (placed && reused >= this.copyMin) {
      chosen.lastUsed = ++this.clock;
      ops.push({ op: "cp", src: chosen.id, dst: placed.id }, { op: "rm", seq: placed.id, from: reused });
      chosen = placed;
    } else if (placed) {
      // Too short a shared part to be worth a copy: computed again there.
      [chosen, reused] = [placed, 0];
      if (placed.held.length > 0) ops.push({ op: "rm", seq: placed.id, from: 0 });
    } else if (chosen.held.length > reused) ops.push({ op: "rm", seq: chosen.id, from: reused });
    chosen.busy = true;
    chosen.lastUsed = ++this.clock;
    chosen.held = [];
    chosen.heldPrompt = 0;
    chosen.namespace = namespace;
    return { sequence: chosen.id, reused };
  }

  /**
   * Running sequences next to `s` by id (0, 1 or 2). llama.cpp runs a step's sequences in
   * micro-batches of consecutive ids, each a pass over the weights: six decodes on ids 0-5 took 150
   * ms (Qwen2.5-Coder-0.5B, 2 AVX2 cores), on 0, 2, 3, 5, 6 and 7 237 ms. A request placed next to a
   * running one keeps the ids in one run; a stream copy (to bring a long cached prefix along) costs
   * less than a pass every step of the request's life.
   */
  private nextToBusy(s: Sequence): number {
    return (this.sequences[s.id - 1]?.busy ? 1 : 0) + (this.sequences[s.id + 1]?.busy ? 1 : 0);
  }

  /** An idle sequence other than `keep` to run in: an empty one, else the least recently used; of those, next to the most running ones. */
  private spare(idle: readonly Sequence[], keep: Sequence): Sequence | undefined {
    const rank = (s: Sequence) => [s.held.length === 0 ? 0 : 1, -this.nextToBusy(s), s.lastUsed];
    const byRank = (a: Sequence, b: Sequence) => {
      const [x, y] = [rank(a), rank(b)];
      return x[0]! - y[0]! || x[1]! - y[1]! || x[2]! - y[2]!;
    };
    return idle.filter((s) => s !== keep).sort(byRank)[0];
  }

  /**
   * Gives a sequence back; with `keep`, its cells stay for the namespace's next prompts. `promptLength`:
   * how many of `keep`'s leading tokens were the request's prompt (by default all of them).
   */
  give(id: number, keep: readonly Token[] | undefined, ops: MemoryOp[], promptLength = Infinity): void {
    const s = this.sequences[id]!;
    s.busy = false;
    s.lastUsed = ++this.clock;
    if (this.prefixCache && keep && s.namespace !== undefined) {
      s.held = keep.slice();
      s.heldPrompt = Math.min(promptLength, keep.length);
      return;
    }
    s.held = [];
    s.heldPrompt = 0;
    s.namespace = undefined;
    ops.push({ op: "rm", seq: id, from: 0 });
  }

  private match(s: Sequence, namespace: string | undefined, tokens: readonly Token[]): number {
    if (!this.prefixCache || namespace === undefined || s.namespace !== namespace) return 0;
    const limit = Math.min(s.held.length, tokens.length);
    let n = 0;
    while (n < limit && s.held[n] === tokens[n]) n++;
    return n;
  }
}
