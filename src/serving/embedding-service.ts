import type { EmbeddingBackend, Embedded } from "../backends/embedding-backend.js";
import { requestCost } from "../billing/cost.js";
import { servedTier, type RequestedTier } from "../billing/prices.js";
import type { ServiceTier } from "../protocol/tiers.js";
import type { RateLimitState } from "../protocol/rate-limit-headers.js";
import { CapacityUnavailable, InvalidRequest } from "../errors.js";
import { newRequestId } from "../protocol/request-ids.js";
import type { UsageLedger } from "../billing/ports.js";
import type { ServingMetrics } from "./ports.js";
import type { Caller, RequestContext } from "./types.js";
import { beside, reserveWhole, type AdmissionDeps, type Holdings } from "./admission.js";
import { RequestMeter, type MeterOutcome } from "./request-meter.js";
import { requireServedModel } from "./served-model.js";
import { canonicalId } from "./model-registry.js";
import { apiErrorOf } from "./backend-refusals.js";
import { admittedAttributes, UNTRACED, usageAttributes } from "./run-trace.js";
import { errorCodeOf, recordUnserved } from "./unserved-row.js";

export interface EmbeddingInput {
  model: string;
  /** Texts, or token ids of the model's own vocabulary. */
  inputs: Array<string | number[]>;
  /** Accepted only when it is the model's native size. */
  dimensions?: number;
  serviceTier?: RequestedTier;
  /** The answer writes the vectors as JSON numbers: the engine writes their text beside them (EmbeddingResult.json). */
  json?: boolean;
}

export interface EmbeddingResult {
  model: string;
  serviceTier: ServiceTier;
  /** Unit-length vectors, in input order. */
  vectors: Float32Array[];
  /** Each vector's JSON array text, when the input asked for `json`. */
  json?: string[];
  promptTokens: number;
  /** US dollars, exact decimal string. */
  cost: string;
  /** The key's rate-limit windows as its admission left them (the answer's headers). */
  rateLimits?: RateLimitState;
}

export interface EmbeddingService {
  /** Every request, served or refused, leaves exactly one ledger row (api `embeddings`). */
  embed(
    caller: Caller,
    input: EmbeddingInput,
    signal: AbortSignal,
    context?: Pick<RequestContext, "requestId" | "trace">,
  ): Promise<EmbeddingResult>;
}

/** What the embedding service needs: the models and the admission's budgets and limits, the ledger, and metrics. */
export interface EmbeddingServiceDeps extends AdmissionDeps {
  ledger: UsageLedger;
  metrics?: ServingMetrics;
}

/**
 * Embeddings through the platform as chat goes through it: the key's model allow-list, the price
 * of the tier served, a budget reservation, rate limits counting the input tokens, one ledger row.
 */
export function createEmbeddingService({ registry, ledger, limits, budgets, inFlight, metrics }: EmbeddingServiceDeps): EmbeddingService {
  return {
    async embed(caller, input, signal, context = {}) {
      const requestId = context.requestId ?? newRequestId("embeddings");
      const trace = context.trace ?? UNTRACED;
      const meterContext = {
        requestId,
        accountId: caller.accountId,
        keyId: caller.keyId,
        model: canonicalId(registry, input.model),
        batchId: caller.batchId,
      };
      const meter = new RequestMeter(ledger, { ...meterContext, api: "embeddings" }, trace);
      const held: Holdings = { tier: "default", promptTokens: 0 };
      try {
        const admitting = trace.stage("switchyard.admission");
        const { entry, embedder, tokens, prices, cost } = await prepare(registry, caller, input, held);
        const { tier, promptTokens } = held;
        const { durable, unreserved } = await reserveWhole({ inFlight, budgets, limits }, caller, meter, held, {
          model: entry.id,
          prices,
          maxCompletionTokens: 0,
        }).finally(() => admitting.end());
        trace.annotate(admittedAttributes({ api: "embeddings", requestedModel: input.model, model: entry.id, id: requestId, tier }));
        const embedding = trace.stage("switchyard.embed");
        const { vectors, json } = await beside(
          durable,
          () => runEmbedding(embedder, tokens, tier, signal, input.json),
          async () => {},
        ).finally(() => embedding.end());
        const observer = metrics?.request(entry.id, tier);
        observer?.admitted(0, promptTokens, 0);
        observer?.finished("stop", 0);
        const lease = held.lease!;
        held.lease = undefined; // released here, never again on an error below
        await lease.release(promptTokens);
        // The answer waits for its row, with a budget or without: a crash before the row is written
        // bills nothing (nothing was delivered; a budgeted request's in-flight row is closed at cost 0
        // and its reservation released), and once it is written the request is billed exactly.
        await meter.record(outcome(held, { status: "completed", costUsd: cost, finishReason: "stop", errorCode: null, unreserved }));
        trace.annotate(usageAttributes({ promptTokens, cachedPromptTokens: 0, completionTokens: 0, cost }));
        return { model: input.model, serviceTier: tier, vectors, json, promptTokens, cost, rateLimits: lease.state };
      } catch (error) {
        const status = signal.aborted ? "cancelled" : held.lease ? "failed" : "rejected";
        const errorCode = errorCodeOf(error, signal.aborted ? "cancelled" : "internal_error");
        // Once admitted, its input tokens count against the key's tokens per minute even though it failed (chat's refusals count none).
        await recordUnserved(meter, held, { status, errorCode, tokensUsed: held.promptTokens });
        throw error;
      }
    },
  };
}

/** The model that serves the request, its inputs' tokens, and the tier's prices and cost (in `held` as they are known). */
async function prepare(registry: EmbeddingServiceDeps["registry"], caller: Caller, input: EmbeddingInput, held: Holdings) {
  const served = requireServedModel(registry, caller, input.model, "embeddings");
  const embedder = served.embedder;
  if (!embedder) throw new CapacityUnavailable(`The model '${input.model}' is still loading; retry shortly.`, 5);
  checkDimensions(embedder, input.dimensions);
  const tokens = await tokenizeInputs(embedder, input.inputs);
  const promptTokens = (held.promptTokens = tokens.reduce((sum, t) => sum + t.length, 0));
  const { tier, prices } = servedTier(served.entry.pricing, input.serviceTier, Boolean(caller.batchId));
  held.tier = tier;
  const cost = requestCost(prices, { promptTokens, cachedPromptTokens: 0, completionTokens: 0 });
  return { entry: served.entry, embedder, tokens, prices, cost };
}

/** An embedding request's ledger outcome: its prompt tokens, nothing generated. */
function outcome(
  held: Holdings,
  result: Pick<MeterOutcome, "status" | "costUsd" | "finishReason" | "errorCode" | "unreserved">,
): MeterOutcome {
  return { ...result, serviceTier: held.tier, promptTokens: held.promptTokens, cachedTokens: 0, completionTokens: 0 };
}

function checkDimensions(embedder: EmbeddingBackend, dimensions: number | undefined): void {
  if (dimensions === undefined || dimensions === embedder.dimensions) return;
  throw new InvalidRequest(
    `Invalid 'dimensions': this model's embeddings have ${embedder.dimensions} dimensions and cannot be shortened; omit 'dimensions' or send ${embedder.dimensions}.`,
    "dimensions",
    "invalid_value",
  );
}

/** Each input's tokens; one over the model's context is refused, never truncated. Texts yield the event loop as they go. */
async function tokenizeInputs(embedder: EmbeddingBackend, inputs: Array<string | number[]>): Promise<Int32Array[]> {
  const all: Int32Array[] = [];
  let sinceYield = 0;
  for (const [index, input] of inputs.entries()) {
    if (typeof input !== "string") checkTokenIds(embedder, input, index);
    const tokens = typeof input === "string" ? await embedder.tokenize(input) : embedder.wrapTokens(input);
    if (tokens.length > embedder.maxInputTokens) {
      throw new InvalidRequest(
        `This model's maximum context length is ${embedder.maxInputTokens} tokens, but input ${index} has ${tokens.length} tokens. Shorten or split it: inputs are never truncated.`,
        `input[${index}]`,
        "context_length_exceeded",
      );
    }
    all.push(tokens);
    // 2,048 short inputs are as much work as one long one: the event loop gets a turn between them too.
    sinceYield += tokens.length;
    if (sinceYield >= YIELD_EVERY_TOKENS) {
      sinceYield = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  return all;
}

/** Token ids of an input sent as ids must be the model's own. */
function checkTokenIds(embedder: EmbeddingBackend, ids: readonly number[], index: number): void {
  const outside = ids.find((id) => id >= embedder.vocabularySize);
  if (outside !== undefined)
    throw new InvalidRequest(
      `Invalid 'input[${index}]': token id ${outside} is outside the model's vocabulary of ${embedder.vocabularySize} tokens.`,
      `input[${index}]`,
      "invalid_value",
    );
}

/** Input tokens between two turns of the event loop while a request's inputs are tokenized (about 1 ms of WordPiece). */
const YIELD_EVERY_TOKENS = 2048;

async function runEmbedding(
  embedder: EmbeddingBackend,
  tokens: Int32Array[],
  tier: ServiceTier,
  signal: AbortSignal,
  json = false,
): Promise<Embedded> {
  try {
    return await embedder.embed(tokens, tier, signal, json);
  } catch (error) {
    throw apiErrorOf(error, { promptParam: "input" });
  }
}
