import type { FastifyInstance } from "fastify";
import type { BackendStats, EngineCounters, ShardStepBudget } from "../../backends/backend.js";
import type { WireEngineCounters, WireHealth, WireHealthModel, WireModelLoad, WireStepBudget } from "../../protocol/health-response.js";
import { tierTotal } from "../../protocol/tiers.js";
import { privateOwner, type ModelRegistry } from "../../serving/model-registry.js";
import type { Drain } from "../drain.js";
import { route, type RouteSpec } from "../route-spec.js";

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const healthOperations = {
  health: {
    method: "get",
    path: "/health",
    id: "health",
    summary: "Readiness and load per model",
    auth: "none",
    response: {
      description:
        '200 once every model is loaded; 503 while loading, if one failed, or while the server drains before stopping (`status: "draining"`).',
    },
    errors: [503],
  },
} satisfies Record<string, RouteSpec>;

/**
 * Unauthenticated readiness: 200 once every model is loaded; 503 while loading, if one failed to
 * load, or while the server drains before stopping ("draining": a load balancer stops routing here).
 */
export function healthRoutes(app: FastifyInstance, registry: ModelRegistry, drain?: Pick<Drain, "draining">): void {
  route(app, healthOperations.health, async (_request, reply) => {
    // Unauthenticated: private deployments and adapters are never listed here.
    const models: WireHealthModel[] = registry
      .list()
      .filter((m) => privateOwner(m) === undefined)
      .map(({ entry, state, backend, embedder, error }) => ({
        id: entry.id,
        state,
        ...(backend ? load(backend.stats()) : {}),
        // An embedding model: inputs waiting, inputs and tokens embedded, batches, decode seconds.
        ...(embedder ? { embeddings: embedder.stats() } : {}),
        ...(error ? { error } : {}),
      }));
    if (drain?.draining) return reply.status(503).send({ status: "draining", models } satisfies WireHealth);
    const ready = registry.allReady();
    const status = ready ? "ok" : models.some((m) => m.state === "loading") ? "loading" : "degraded";
    return reply.status(ready ? 200 : 503).send({ status, models } satisfies WireHealth);
  });
}

/** Totals first (what a load balancer reads), then the split by tier. */
function load(stats: BackendStats): WireModelLoad {
  return {
    running: tierTotal(stats.running),
    waiting: tierTotal(stats.waiting),
    sequences: stats.slots,
    idle_cached_sequences: stats.idleSequences,
    kv_cache_usage: Number(stats.kvCacheUsage.toFixed(4)),
    preemptions: stats.preemptions,
    ...(stats.prioritySaturated !== undefined ? { priority_saturated: stats.prioritySaturated } : {}),
    ...(stats.paused !== undefined ? { paused: stats.paused } : {}),
    by_tier: { running: stats.running, waiting: stats.waiting },
    ...(stats.engine
      ? { engine: { ...engineCounters(stats.engine), ...(stats.stepBudgets ? { shards: stats.stepBudgets.map(stepBudget) } : {}) } }
      : {}),
    ...(stats.replicas
      ? {
          replicas: stats.replicas.map((r) => ({
            index: r.index,
            health: r.health,
            running: r.running,
            max_concurrency: r.maxConcurrency,
            served: r.served,
          })),
        }
      : {}),
  };
}

/** The cost model's five coefficients (ms), in engine/types.ts's order. */
type Coefficients = [fixed: number, perSampled: number, perPrompt: number, per1kAttended: number, perDraft: number];

/**
 * A shard's last planned step: the time budget in force (null: nobody decoding), its tokens and
 * predicted time; the cost model's coefficients now (what drafting and chunk sizes are decided by); and its
 * speculative decoding since start (acceptance_rate null: nothing drafted yet).
 */
function stepBudget(b: ShardStepBudget): WireStepBudget {
  const { draftTokens, acceptedTokens, acceptanceRate } = b.speculation;
  const speculation = {
    draft_tokens: draftTokens,
    accepted_tokens: acceptedTokens,
    acceptance_rate: acceptanceRate === null ? null : Number(acceptanceRate.toFixed(4)),
  };
  const [fixed, perSampled, perPrompt, per1kAttended, perDraft] = b.costModel.map((ms) => Number(ms.toFixed(3))) as Coefficients;
  const costModel = {
    fixed_ms: fixed,
    per_sampled_token_ms: perSampled,
    per_prompt_token_ms: perPrompt,
    per_1k_attended_ms: per1kAttended,
    per_draft_token_ms: perDraft,
  };
  return {
    step_budget_ms: b.budgetMs,
    step_budget_tokens: b.tokens,
    planned_step_ms: Number(b.plannedMs.toFixed(1)),
    cost_model: costModel,
    speculation,
  };
}

/** The step loop's totals, so an operator (and the benchmark) can see where the time goes. */
function engineCounters(c: EngineCounters): WireEngineCounters {
  return {
    steps: c.steps,
    batch_tokens: c.batchTokens,
    prompt_tokens_computed: c.promptTokensComputed,
    restored_cells: c.restoredCells,
    sampled_tokens: c.sampledTokens,
    setup_seconds: Number((c.setupMs / 1000).toFixed(3)),
    decode_seconds: Number((c.decodeMs / 1000).toFixed(3)),
    sample_seconds: Number((c.sampleMs / 1000).toFixed(3)),
    step_round_trip_seconds: Number((c.roundTripMs / 1000).toFixed(3)),
    host_seconds: Number((c.hostMs / 1000).toFixed(3)),
    adapter_turn_steps: c.adapterTurnSteps,
    moved_requests: c.movedRequests,
  };
}
