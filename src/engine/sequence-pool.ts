import type { LlamaContext, LlamaContextSequence } from "node-llama-cpp";
import { StepGate } from "./step-gate.js";
import type { Token } from "./types.js";

/**
 * The context's sequences, and the prefix cache they make up.
 *
 * A finished request's sequence keeps its KV cells, idle, under the request's cache namespace (the
 * account). A later request of the same namespace whose prompt starts with those tokens takes that
 * sequence and evaluates only the rest, typically a conversation's next turn resending its history.
 * Another namespace never reuses them, so no account can learn by timing what another sent.
 * Idle sequences are evicted least recently used when a sequence is needed; one in use never is.
 */
export interface TakenSequence {
  sequence: LlamaContextSequence;
  /** Leading prompt tokens already in the sequence's cells (not evaluated again). */
  reusedTokens: number;
}

interface IdleSequence {
  sequence: LlamaContextSequence;
  namespace: string;
  lastUsed: number;
}

export interface SequencePoolStats {
  /** Sequences holding cached cells and not in use. */
  idle: number;
  /** KV cells holding tokens, over all sequences, in use or idle. */
  usedCells: number;
}

export class SequencePool {
  private readonly idle: IdleSequence[] = [];
  private readonly empty: LlamaContextSequence[] = [];
  private readonly all = new Set<LlamaContextSequence>();
  private clock = 0;

  constructor(
    private readonly context: LlamaContext,
    private readonly prefixCache: boolean,
    /** Erasing cells needs the context to itself: the running streams pause for it (see StepGate). */
    private readonly gate = new StepGate(),
  ) {}

  /**
   * A sequence ready to evaluate `prompt` from `reusedTokens` on. At least the prompt's last token
   * is left to evaluate, since its logits give the first generated token.
   */
  async take(namespace: string | undefined, prompt: readonly Token[]): Promise<TakenSequence> {
    const match = this.prefixCache && namespace !== undefined ? this.bestMatch(namespace, prompt) : undefined;
    // A match worth less than half its cells is not worth destroying while an empty sequence is at hand.
    if (match && (match.common * 2 >= match.entry.sequence.nextTokenIndex || !this.hasEmpty())) {
      this.idle.splice(this.idle.indexOf(match.entry), 1);
      const reusedTokens = Math.min(match.common, prompt.length - 1);
      const { sequence } = match.entry;
      if (reusedTokens < sequence.nextTokenIndex) await this.gate.exclusive(() => sequence.eraseContextTokenRanges([{ start: reusedTokens, end: sequence.nextTokenIndex }]));
      return { sequence, reusedTokens };
    }
    return { sequence: await this.emptySequence(), reusedTokens: 0 };
  }

  /** Returns a sequence; `keepCells` leaves its tokens cached for its namespace, else its cells are dropped. */
  async give(sequence: LlamaContextSequence, namespace: string | undefined, keepCells: boolean): Promise<void> {
    if (sequence.disposed) {
      this.all.delete(sequence);
      return;
    }
    if (keepCells && this.prefixCache && namespace !== undefined && sequence.nextTokenIndex > 0) {
      this.idle.push({ sequence, namespace, lastUsed: ++this.clock });
      return;
    }
    await this.gate.exclusive(() => sequence.clearHistory());
    this.empty.push(sequence);
  }

  stats(): SequencePoolStats {
    let usedCells = 0;
    for (const sequence of this.all) if (!sequence.disposed) usedCells += sequence.nextTokenIndex;
    return { idle: this.idle.length, usedCells };
  }

  private bestMatch(namespace: string, prompt: readonly Token[]): { entry: IdleSequence; common: number } | undefined {
    let best: { entry: IdleSequence; common: number } | undefined;
    for (const entry of this.idle) {
      if (entry.namespace !== namespace) continue;
      const common = entry.sequence.compareContextTokens(prompt as Token[]).firstDifferentIndex;
      if (common > 0 && (!best || common > best.common)) best = { entry, common };
    }
    return best;
  }

  private hasEmpty(): boolean {
    return this.empty.length > 0 || this.context.sequencesLeft > 0;
  }

  private async emptySequence(): Promise<LlamaContextSequence> {
    const reused = this.empty.pop();
    if (reused) return reused;
    if (this.context.sequencesLeft > 0) {
      const sequence = this.context.getSequence();
      this.all.add(sequence);
      return sequence;
    }
    const lru = this.idle.reduce<IdleSequence | undefined>((oldest, entry) => (!oldest || entry.lastUsed < oldest.lastUsed ? entry : oldest), undefined);
    if (!lru) throw new Error("No sequence free: the scheduler admitted more requests than the context has sequences.");
    this.idle.splice(this.idle.indexOf(lru), 1);
    await this.gate.exclusive(() => lru.sequence.clearHistory());
    return lru.sequence;
  }
}
