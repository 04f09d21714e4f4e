/**
 * One API operation (an endpoint that generates or embeds), as both of its callers use it: the HTTP
 * route (http/routes/generation.ts) and the batch runner's lines (batches/line-executor.ts). It takes
 * a caller and a body already checked against its schema, and answers JSON or a stream of chunks;
 * how those reach the wire (headers, SSE, aborts, failures mid-stream) is the caller's business.
 */
import type { z } from "zod";
import type { ErrorBody } from "../errors.js";
import type { RateLimitState } from "../protocol/rate-limit-headers.js";
import type { ApiKind } from "../protocol/request-ids.js";
import type { Caller } from "../protocol/principal.js";
import type { EndpointSpec } from "./endpoint.js";
import type { PauseControl } from "../protocol/generation.js";
import type { RequestTrace } from "../serving/trace-port.js";

/**
 * A generation endpoint's declaration: the one endpoint declaration (endpoint.ts), with a body always,
 * and what the ledger and the trace name it.
 */
export interface OperationSpec<Body = unknown> extends EndpointSpec {
  method: "post";
  /** The request body's schema (src/protocol/); the route and each batch line parse with it. */
  body: z.ZodType<Body>;
  /** The ledger's name for the API (and the prefix of its request ids). */
  kind: ApiKind;
  /** The GenAI operation its trace span names. */
  traceOperation: "chat" | "text_completion" | "embeddings";
}

/** What a run needs of where it was called from. */
export interface OperationContext {
  /** Aborted when the caller goes away (or a shutdown stops waiting); the run then ends. */
  signal: AbortSignal;
  /** The ledger row's id, and the completion's. */
  requestId: string;
  /** Held while the client does not read its stream: generation pauses (back-pressure). */
  output?: PauseControl;
  trace?: RequestTrace;
  /** `/v1/compat`'s streamed chat puts `role` in every chunk, as the specification's contract says. */
  roleInEveryChunk?: boolean;
  /** Where a failure that does not reach the caller is told (a ledger row that could not be marked). */
  logError(message: string, error: unknown): void;
}

/** One server-sent event: `data` as JSON, under `event` when named (the Responses API names its events). */
export interface Chunk {
  event?: string;
  data: unknown;
}

/** What a run answers; `rateLimits`: the key's windows as its admission left them (the rate-limit headers). */
export type OperationResult =
  | {
      type: "json";
      /** The answer as JSON text; null when the run was cancelled (nobody is left to answer). */
      body: string | null;
      rateLimits?: RateLimitState;
    }
  | {
      type: "stream";
      chunks: AsyncIterable<Chunk>;
      rateLimits?: RateLimitState;
      /** The stream ends with `data: [DONE]` (chat, completions); the Responses API sends none. */
      doneSentinel: boolean;
      /** The chunk that tells the client of a failure after the stream began. */
      failure(error: ErrorBody): Chunk;
    };

export interface Operation<Body = unknown> extends OperationSpec<Body> {
  run(caller: Caller, body: Body, context: OperationContext): Promise<OperationResult>;
}
