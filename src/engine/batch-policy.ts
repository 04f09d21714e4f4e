import type { BatchItem, CustomBatchingPrioritizationStrategy, EvaluationPriority, PrioritizedBatchItem } from "node-llama-cpp";
import type { SchedulingClass } from "./scheduler.js";

/** How node-llama-cpp ranks each class's tokens within one batch. */
export const EVALUATION_PRIORITY: Record<SchedulingClass, EvaluationPriority> = { priority: 5, standard: 3, flex: 1 };

/** A pending item this short is a decode step (one sampled token), not a prompt being loaded. */
const DECODE_STEP_TOKENS = 1;

/**
 * Fills one decode step's token budget (the context's batch size): first every running stream's
 * next token, highest class first, then prompts, highest class first and in arrival order, in
 * chunks of whatever budget is left. A long prompt so loads over several steps while the streams
 * already running keep getting a token every step (chunked prefill).
 */
export const decodeFirstThenPrefill: CustomBatchingPrioritizationStrategy = ({ items, size }) => {
  const rank = (item: BatchItem) => (item.tokens.length <= DECODE_STEP_TOKENS ? 10 : 0) + item.evaluationPriority;
  // Array.prototype.sort is stable, so equal ranks keep their arrival order.
  const ordered = [...items].sort((a, b) => rank(b) - rank(a));
  const batch: PrioritizedBatchItem[] = [];
  let left = size;
  for (const item of ordered) {
    if (left <= 0) break;
    const processAmount = Math.min(item.tokens.length, left);
    batch.push({ item, processAmount });
    left -= processAmount;
  }
  return batch;
};
