import { SERVICE_TIERS, tierTotal } from "../protocol/tiers.js";
import type { ModelRegistry } from "../serving/model-registry.js";

/** Every tier but batch: what batch lines give way to. */
const AHEAD_OF_BATCH = SERVICE_TIERS.filter((tier) => tier !== "batch");

/** Embedding lines run at once on an idle embedding model: enough to keep its batches full. */
const EMBEDDING_LINES = 4;

/**
 * How many batch lines a model may run at once now: its sequences that no priority, standard or
 * flex request holds or waits for. A model still loading runs none; a model that cannot serve
 * (unknown, not pulled, failed) runs one at a time, so each line gets the error a request would.
 */
export function batchCapacity(registry: ModelRegistry): (model: string) => number {
  return (model) => {
    const served = registry.get(model);
    if (served?.state === "loading") return 0;
    // An embedding model's lines run while no other tier's inputs wait; each line may hold 2,048 inputs.
    if (served?.embedder && served.state === "ready") return served.embedder.stats().waitingInputs === 0 ? EMBEDDING_LINES : 0;
    if (!served?.backend || served.state !== "ready") return 1;
    const { slots, running, waiting } = served.backend.stats();
    return Math.max(0, slots - tierTotal(running, AHEAD_OF_BATCH) - tierTotal(waiting, AHEAD_OF_BATCH));
  };
}
