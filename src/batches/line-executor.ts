/**
 * Runs a batch line as the operation its endpoint names (api/registry.ts, handed in), the very one a client's
 * request runs, never through HTTP: the body is taken as the HTTP edge takes a JSON body and
 * checked against the operation's schema, the run goes through the request lifecycle (limits,
 * budget, ledger) as the batch's key with the batch on it (batch tier, batch price, batch id on
 * its ledger row), and any error answers with the status and OpenAI error body the HTTP layer
 * would send (errors.ts's one map). A line for a deployment another server process runs is
 * forwarded there (`forward`), as a client's request would be.
 */
import type { z } from "zod";
import {
  answerOf,
  bodyTooLarge,
  InvalidRequest,
  ServerShuttingDown,
  toErrorBody,
  Unauthorized,
  unknownUrl,
  type ServiceError,
} from "../errors.js";
import { parseJsonBody, parseRequest } from "../protocol/parse-request.js";
import type { Principal } from "../protocol/principal.js";
import { newRequestId, type ApiKind } from "../protocol/request-ids.js";
import type { RequestTrace } from "../serving/trace-port.js";
import type { LineExecutor, LineRequest, LineResult } from "./runner.js";

/**
 * What a line runs: an api/ operation (api/operation.ts's Operation is one), handed in at start so
 * batches/ stands below api/ and imports none of it.
 */
export interface LineOperation {
  kind: ApiKind;
  traceOperation: string;
  /** The request body's schema; the line's body is parsed with it. */
  body: z.ZodType;
  run(
    caller: Principal,
    body: unknown,
    context: { signal: AbortSignal; requestId: string; trace?: RequestTrace; logError(message: string, error: unknown): void },
  ): Promise<LineOutcome>;
}

/** What a run answers: JSON text (null when cancelled), or a stream, which a line cannot ask for. */
type LineOutcome = { type: "json"; body: string | null } | { type: "stream" };

export interface LineExecutorDeps {
  /** The operations by path (`/chat/completions`, ...): api/registry.ts's. */
  operations: ReadonlyMap<string, LineOperation>;
  /** The batch's key as it stands now, with the batch on it; null once the key is revoked or expired, or its account disabled. */
  callerOf(line: LineRequest): Promise<Principal | null>;
  /**
   * Runs the line as the server's own request (http/drain.ts): counted in flight, refused while the
   * server drains (ServerShuttingDown), its signal aborted when the drain stops waiting.
   */
  track<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T>;
  /** Where another server process runs the caller's deployment `model`; null: this one answers. */
  locate?(caller: Principal, model: string): Promise<string | null>;
  /** Sends the line to that process; its answer (and the ledger row it names) is the line's. */
  forward?(ownerUrl: string, line: ForwardedLine, signal: AbortSignal): Promise<Omit<LineResult, "code">>;
  /** A trace span for the line (tracing on); ended with the line's status. */
  trace?(operation: string): RequestTrace & { end(statusCode: number): void };
  /** The largest body (bytes) and deepest nesting a request may have (SWITCHYARD_MAX_BODY_BYTES, SWITCHYARD_MAX_JSON_DEPTH). */
  bodyLimit: number;
  maxJsonDepth: number;
  log(message: string): void;
}

const KEY_GONE = new Unauthorized("The API key that created this batch is no longer valid (revoked or expired, or its account disabled).");

export function createLineExecutor(deps: LineExecutorDeps): LineExecutor {
  return async (line) => {
    const caller = await deps.callerOf(line);
    // No request was made: the line's answer names no request id.
    if (!caller) return { ...answer(KEY_GONE), requestId: null };
    const operation = deps.operations.get(line.endpoint.slice("/v1".length));
    const requestId = newRequestId(operation?.kind ?? "other");
    const traced = operation && deps.trace?.(operation.traceOperation);
    let result: LineResult;
    try {
      result = await deps.track(async (signal) => {
        if (!operation) throw unknownUrl("POST", line.endpoint);
        const stop = line.signal ? AbortSignal.any([signal, line.signal]) : signal;
        return runLine(deps, { operation, caller, line, requestId, trace: traced }, stop);
      });
    } catch (error) {
      const known = answerOf(error, (failure) => deps.log(`batch ${line.batchId}: a line failed: ${String(failure)}`));
      result = { ...answer(known), requestId };
    }
    traced?.end(result.statusCode);
    return result;
  };
}

interface ForwardedLine {
  caller: Principal;
  endpoint: string;
  body: string;
  model: string;
}

interface LineRun {
  operation: LineOperation;
  caller: Principal;
  line: LineRequest;
  requestId: string;
  trace: RequestTrace | undefined;
}

async function runLine(deps: LineExecutorDeps, { operation, caller, line, requestId, trace }: LineRun, signal: AbortSignal) {
  if (Buffer.byteLength(line.body) > deps.bodyLimit) throw bodyTooLarge();
  const raw = parseJsonBody(line.body, deps.maxJsonDepth);
  const model = (raw as { model?: unknown } | undefined)?.model;
  const owner = typeof model === "string" && deps.locate ? await deps.locate(caller, model) : null;
  if (owner !== null && typeof model === "string" && deps.forward) {
    const forwarded = await deps.forward(owner, { caller, endpoint: line.endpoint, body: line.body, model }, signal);
    return { ...forwarded, code: errorCodeOf(forwarded.body) };
  }
  const body = parseRequest(operation.body, raw);
  const result = await operation.run(caller, body, {
    signal,
    requestId,
    trace,
    logError: (message, error) => deps.log(`batch ${line.batchId}: ${message}: ${String(error)}`),
  });
  return { statusCode: 200, body: jsonOf(result), requestId, code: null };
}

function jsonOf(result: LineOutcome): string {
  // The batch's input file was checked for `stream`; a line cannot ask for one.
  if (result.type === "stream") throw new InvalidRequest("batch requests cannot stream; remove 'stream'.", "stream", "invalid_value");
  // Cancelled: only a stopping server cancels a line; it runs again after the restart.
  if (result.body === null) throw new ServerShuttingDown();
  return result.body;
}

function answer(error: ServiceError): Omit<LineResult, "requestId"> {
  return { statusCode: error.status, body: JSON.stringify(toErrorBody(error)), code: error.code };
}

/** The error `code` of another process's answer, which comes back as HTTP. */
function errorCodeOf(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown } };
    return typeof parsed.error?.code === "string" ? parsed.error.code : null;
  } catch {
    return null;
  }
}
