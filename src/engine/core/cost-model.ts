/** What a step's time depends on. */
export interface StepShape {
  /** Tokens whose logits are sampled (one per decoding stream, one per prompt that ends in the step). */
  decodeTokens: number;
  /** Tokens computed without a sample: prompt chunks. */
  promptTokens: number;
  /** Cells the step's tokens attend over, summed over its tokens (a token at position p reads p cells). */
  attended: number;
}

export const EMPTY_SHAPE: StepShape = { decodeTokens: 0, promptTokens: 0, attended: 0 };

/** Attended cells for `count` tokens computed from position `from` on: from+1, from+2, …, from+count. */
export function attendedBy(from: number, count: number): number {
  return count * from + (count * (count + 1)) / 2;
}

export function addShapes(a: StepShape, b: StepShape): StepShape {
  return { decodeTokens: a.decodeTokens + b.decodeTokens, promptTokens: a.promptTokens + b.promptTokens, attended: a.attended + b.attended };
}

/** Features of the linear model: a fixed cost, then per decode token, per prompt token, per 1,024 attended cells. */
function features(shape: StepShape): number[] {
  return [1, shape.decodeTokens, shape.promptTokens, shape.attended / 1024];
}

export interface CostModelOptions {
  /** Starting coefficients (ms): fixed, per decode token, per prompt token, per 1,024 attended cells. */
  prior?: readonly number[];
  /** Weight of the past per observation (1: remember everything); under 1 follows a machine that changes. */
  forgetting?: number;
}

/**
 * A shard's step time, learnt online: ms ≈ a + b·decode + c·prompt + d·attended/1024, fitted by
 * recursive least squares with forgetting, so it follows the machine as it gets busier or quieter
 * (another process, the other shard going idle and lending its core). Pure: the shard feeds it the
 * measured decode time of each step; the scheduler asks it what a step would cost.
 */
export class StepCostModel {
  /**
   * Conservative for a 135M model on one slow core (~180 prompt tok/s; a token attending over 1,024
   * cells costs about a quarter of its weights' work), replaced within a few steps.
   */
  static readonly DEFAULT_PRIOR = [5, 6, 5, 1] as const;
  private readonly weights: number[];
  private covariance: number[][];
  private readonly forgetting: number;
  private observed = 0;

  constructor(options: CostModelOptions = {}) {
    this.weights = [...(options.prior ?? StepCostModel.DEFAULT_PRIOR)];
    this.forgetting = options.forgetting ?? 0.97;
    this.covariance = diagonal([100, 10, 1, 1]);
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
    const px = this.covariance.map((row) => dot(row, x));
    const gainDenominator = this.forgetting + dot(x, px);
    const gain = px.map((value) => value / gainDenominator);
    const error = ms - dot(this.weights, x);
    for (let i = 0; i < x.length; i++) this.weights[i]! += gain[i]! * error;
    this.covariance = this.covariance.map((row, i) => row.map((value, j) => (value - gain[i]! * px[j]!) / this.forgetting));
    this.boundCovariance();
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

  /**
   * With forgetting, directions the steps never vary in (say, always 8 decode tokens) would grow
   * without bound and make one odd step swing the fit ("windup"): the covariance is kept bounded.
   */
  private boundCovariance(): void {
    const trace = this.covariance.reduce((sum, row, i) => sum + row[i]!, 0);
    const limit = 1000;
    if (trace <= limit) return;
    const scale = limit / trace;
    this.covariance = this.covariance.map((row) => row.map((value) => value * scale));
  }
}

/** The shape of `count` tokens of one request computed from position `from`. */
export function chunkShape(from: number, count: number, endsWithSample: boolean): StepShape {
  const sampled = endsWithSample ? 1 : 0;
  return { decodeTokens: sampled, promptTokens: count - sampled, attended: attendedBy(from, count) };
}

function dot(a: readonly number[], b: readonly number[]): number {
  return a.reduce((sum, value, i) => sum + value * b[i]!, 0);
}

function diagonal(values: readonly number[]): number[][] {
  return values.map((value, i) => values.map((_, j) => (i === j ? value : 0)));
}
