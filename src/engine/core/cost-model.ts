/** What a step's time depends on. */
export interface StepShape {
  /** Tokens whose logits are sampled (one per decoding stream, one per prompt that ends in the step). */
  decodeTokens: number;
  /** Tokens computed without a sample: prompt chunks. */
  promptTokens: number;
  /** Cells the step's tokens attend over, summed over its tokens (a token at position p reads p cells). */
  attended: number;
  /**
   * Draft tokens verified (absent: none). Each has logits and is sampled, but it rides on its
   * stream's pass over the weights, batched like a prompt chunk: on a CPU a stream's one decode
   * token costs a weight pass and a draft token mostly compute (Qwen2.5-Coder-0.5B, 2 AVX2 cores:
   * 44 ms for one token, ~15 ms more for each of 64), so a model that priced drafts as decodes would
   * never let a long one in.
   */
  draftTokens?: number;
}

export const EMPTY_SHAPE: StepShape = { decodeTokens: 0, promptTokens: 0, attended: 0 };

/** Attended cells for `count` tokens computed from position `from` on: from+1, from+2, …, from+count. */
export function attendedBy(from: number, count: number): number {
  return count * from + (count * (count + 1)) / 2;
}

export function addShapes(a: StepShape, b: StepShape): StepShape {
  return {
    decodeTokens: a.decodeTokens + b.decodeTokens,
    promptTokens: a.promptTokens + b.promptTokens,
    attended: a.attended + b.attended,
    draftTokens: (a.draftTokens ?? 0) + (b.draftTokens ?? 0),
  };
}

/** Features of the linear model: a fixed cost, then per decode token, per prompt token, per 1,024 attended cells, per draft token. */
function features(shape: StepShape): number[] {
  return [1, shape.decodeTokens, shape.promptTokens, shape.attended / 1024, shape.draftTokens ?? 0];
}

export interface CostModelOptions {
  /** Starting coefficients (ms): fixed, per decode token, per prompt token, per 1,024 attended cells, per draft token (absent: as a decode token). */
  prior?: readonly number[];
  /** Weight of the past per observation (1: remember everything); under 1 follows a machine that changes. */
  forgetting?: number;
}

/**
 * A shard's step time, learnt online: ms ≈ a + b·decode + c·prompt + d·attended/1024 + e·draft,
 * fitted by least squares over the steps measured, each weighted `forgetting` less per step since
 * (so it follows the machine as it gets busier or quieter: another process, the other shard going
 * idle and lending its core), with a ridge pull towards the prior that is never forgotten. The
 * pull is what keeps the fit sane where the steps do not tell coefficients apart: a lone stream's
 * steps always hold one decode token, so they say what a + b is but not how it splits, and
 * recursive least squares with forgetting (the model before) let that split drift until one
 * coefficient went negative and the clamped prediction was ten times the step (Qwen2.5-Coder, c1
 * with drafts: fixed -585 ms, decode +636 ms). Pure: the shard feeds it the measured time of each
 * step; the scheduler asks it what a step would cost.
 */
export class StepCostModel {
  /**
   * Conservative for a 135M model on one slow core (~180 prompt tok/s; a token attending over 1,024
   * cells costs about a quarter of its weights' work), replaced within a few steps.
   */
  static readonly DEFAULT_PRIOR = [5, 6, 5, 1, 6] as const;
  private readonly prior: number[];
  private weights: number[];
  /** Σ weight·x·xᵀ and Σ weight·x·ms over the steps measured (weights decaying by `forgetting`). */
  private gram: number[][];
  private moments: number[];
  private readonly forgetting: number;
  private observed = 0;

  constructor(options: CostModelOptions = {}) {
    const prior = options.prior ?? StepCostModel.DEFAULT_PRIOR;
    this.prior = [prior[0]!, prior[1]!, prior[2]!, prior[3]!, prior[4] ?? prior[1]!];
    this.weights = [...this.prior];
    this.forgetting = options.forgetting ?? 0.97;
    this.gram = this.prior.map(() => this.prior.map(() => 0));
    this.moments = this.prior.map(() => 0);
  }

  /** Steps measured so far. */
  get observations(): number {
    return this.observed;
  }

  /** The coefficients now (ms), in the order of the options' prior. */
  get coefficients(): readonly number[] {
    return this.weights.slice();
  }

  /** Predicted step time in ms; never below the fixed cost, each coefficient read as at least 0. */
  predict(shape: StepShape): number {
    const x = features(shape);
    return x.reduce((sum, value, i) => sum + value * Math.max(0, this.weights[i]!), 0);
  }

  /** Takes one measured step. */
  observe(shape: StepShape, ms: number): void {
    if (!Number.isFinite(ms) || ms < 0 || shape.decodeTokens + shape.promptTokens === 0) return;
    const x = features(shape);
    this.gram = this.gram.map((row, i) => row.map((value, j) => this.forgetting * value + x[i]! * x[j]!));
    this.moments = this.moments.map((value, i) => this.forgetting * value + x[i]! * ms);
    // (G + ρI)·w = m + ρ·prior: the data where it speaks, the prior where it does not.
    const system = this.gram.map((row, i) => row.map((value, j) => value + (i === j ? RIDGE : 0)));
    this.weights =
      solve(
        system,
        this.moments.map((value, i) => value + RIDGE * this.prior[i]!),
      ) ?? this.weights;
    this.observed++;
  }

  /**
   * The most tokens (up to `most`) of a prompt chunk starting at position `from` that keep the step
   * within `budgetMs`, given what the step already holds; `endsWithSample`: its last token samples.
   */
  chunkWithin(base: StepShape, budgetMs: number, from: number, most: number, endsWithSample: (count: number) => boolean): number {
    const cost = (count: number) => this.predict(addShapes(base, chunkShape(from, count, endsWithSample(count))));
    if (most <= 0 || cost(1) > budgetMs) return 0;
    let [low, high] = [1, most];
    while (low < high) {
      const middle = Math.ceil((low + high) / 2);
      if (cost(middle) <= budgetMs) low = middle;
      else high = middle - 1;
    }
    return low;
  }
}

/** The shape of `count` tokens of one request computed from position `from`. */
export function chunkShape(from: number, count: number, endsWithSample: boolean): StepShape {
  const sampled = endsWithSample ? 1 : 0;
  return { decodeTokens: sampled, promptTokens: count - sampled, attended: attendedBy(from, count) };
}

/**
 * The ridge's weight, in squared feature units: a few steps' worth against the hundreds of
 * (decaying) observations a busy shard holds, so the data decides every coefficient it can tell apart.
 */
const RIDGE = 5;

/** Solves A·x = b (Gaussian elimination with partial pivoting); undefined if A is singular. */
function solve(a: readonly number[][], b: readonly number[]): number[] | undefined {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let row = col + 1; row < n; row++) if (Math.abs(m[row]![col]!) > Math.abs(m[pivot]![col]!)) pivot = row;
    if (Math.abs(m[pivot]![col]!) < 1e-12) return undefined;
    [m[col], m[pivot]] = [m[pivot]!, m[col]!];
    for (let row = col + 1; row < n; row++) {
      const factor = m[row]![col]! / m[col]![col]!;
      for (let k = col; k <= n; k++) m[row]![k]! -= factor * m[col]![k]!;
    }
  }
  const x = new Array<number>(n).fill(0);
  for (let row = n - 1; row >= 0; row--) {
    let sum = m[row]![n]!;
    for (let k = row + 1; k < n; k++) sum -= m[row]![k]! * x[k]!;
    x[row] = sum / m[row]![row]!;
  }
  return x;
}
