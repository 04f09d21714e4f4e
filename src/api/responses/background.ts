/**
 * Background responses (`background: true`, as OpenAI's): admitted like any request (the key's
 * limits and budget reserved at creation), answered at once as `queued`, then run as the server's
 * own work (a shutdown waits for it, then stops it) while their creator polls, streams, resumes
 * (`starting_after`) or cancels. The row and its events live in storage (background-store.ts); one
 * a dead process left unfinished is failed at the next start (`failOrphaned`), its ledger row
 * closed by billing's recovery, billed once for what it generated.
 */
import { InvalidRequest, ServiceError, toErrorBody } from "../../errors.js";
import { stringifyJson } from "../../protocol/money-json.js";
import type { ResponsesRequestBody } from "../../protocol/responses-request.js";
import type { Caller, ChatInput, ChatMessage, ChatRun, ChatService } from "../../serving/types.js";
import type { Chunk, OperationContext, OperationResult } from "../operation.js";
import { parseStoredEvent, type BackgroundStore } from "./background-store.js";
import { LiveResponse } from "./live-response.js";
import { ResponseBuilder, type ResponseError } from "./response-builder.js";
import type { ResponseStore, StoredResponse } from "./response-store.js";

export interface BackgroundDeps {
  chat: ChatService;
  responses: ResponseStore;
  store: BackgroundStore;
  /** This server process (processes/owners.ts): its unfinished responses are failed once it is gone. */
  ownerId: string;
  /** Unfinished background responses an account may have (settings.backgroundResponsesPerAccount). */
  maxUnfinished: number;
  /** Runs the work as the server's own request (http/drain.ts): its signal aborts when a shutdown stops waiting. */
  runAsServer<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T>;
}

/** What the operation has made of the request: the chat input, and the conversation and items it continues. */
export interface PreparedResponse {
  input: ChatInput;
  conversation: ChatMessage[];
  inputItems: StoredResponse["inputItems"];
}

export interface BackgroundResponses {
  create(caller: Caller, body: ResponsesRequestBody, prepared: PreparedResponse, context: OperationContext): Promise<OperationResult>;
  /** The events after `after`, then live ones until it ends (the caller has checked it is the account's and background). */
  follow(accountId: string, id: string, after: number, signal: AbortSignal): AsyncGenerator<Chunk>;
  /** Cancels an unfinished one; resolves once its end is stored. */
  cancel(accountId: string, id: string): Promise<void>;
  /** Stops one about to be deleted, if it runs here. */
  stop(accountId: string, id: string): void;
}

export const UNFINISHED_STATUSES: ReadonlySet<string> = new Set(["queued", "in_progress"]);
/** How often a follower of a response running elsewhere (or ended) looks for new events. */
const STORED_POLL_MS = 250;

export function createBackgroundResponses(deps: BackgroundDeps): BackgroundResponses {
  const live = new Map<string, LiveResponse>();
  const ours = (accountId: string, id: string) => {
    const response = live.get(id);
    return response?.accountId === accountId ? response : undefined;
  };
  // Creations of each account between the cap's check and their row: counted against the cap, so
  // concurrent creates cannot all pass a count that none of them has raised yet.
  const creating = new Map<string, number>();
  const start = async (caller: Caller, body: ResponsesRequestBody, run: Omit<Starting, "caller" | "body">) => {
    const pending = creating.get(caller.accountId) ?? 0;
    creating.set(caller.accountId, pending + 1);
    try {
      await checkCreatable(deps, caller, body, pending);
      return await startRun(deps, { caller, body, ...run });
    } finally {
      const left = (creating.get(caller.accountId) ?? 1) - 1;
      if (left > 0) creating.set(caller.accountId, left);
      else creating.delete(caller.accountId);
    }
  };
  return {
    async create(caller, body, prepared, context) {
      const response = new LiveResponse(context.requestId, caller.accountId, deps.store);
      const started = await start(caller, body, { prepared, response });
      live.set(response.id, response);
      void response.ended.then(() => live.delete(response.id));
      if (!body.stream) return { type: "json", body: stringifyJson(started.builder.snapshot("queued")), rateLimits: started.rateLimits };
      return {
        type: "stream",
        chunks: response.follow(-1, context.signal),
        rateLimits: started.rateLimits,
        doneSentinel: false,
        failure: (error) => ({ event: "error", data: { ...error.error, type: "error" } }),
      };
    },
    follow(accountId, id, after, signal) {
      return ours(accountId, id)?.follow(after, signal) ?? followStored(deps, accountId, id, after, signal);
    },
    async cancel(accountId, id) {
      const response = ours(accountId, id);
      if (!response) return deps.store.cancelStored(accountId, id);
      response.stoppedBy ??= "cancel";
      response.controller.abort(new Error("cancelled by its creator"));
      await response.ended;
    },
    stop(accountId, id) {
      const response = ours(accountId, id);
      if (!response) return;
      response.stoppedBy = "delete";
      response.controller.abort(new Error("deleted by its creator"));
    },
  };
}

async function checkCreatable(deps: BackgroundDeps, caller: Caller, body: ResponsesRequestBody, pending: number): Promise<void> {
  if (body.store === false)
    throw new InvalidRequest("Background responses must be stored: 'background' requires 'store' to be true (or absent).", "store");
  if (caller.batchId)
    throw new InvalidRequest("'background' is not supported in a batch: a batch's lines run in the background already.", "background");
  const unfinished = (await deps.store.countUnfinished(caller.accountId)) + pending;
  if (unfinished >= deps.maxUnfinished)
    throw new ServiceError(
      429,
      "rate_limit_error",
      `This account has ${unfinished} background responses queued or in progress, the most it may have (SWITCHYARD_BACKGROUND_RESPONSES_PER_ACCOUNT is ${deps.maxUnfinished}); wait for one to finish, or cancel one.`,
      "too_many_background_responses",
      "background",
    );
}

interface Starting {
  caller: Caller;
  body: ResponsesRequestBody;
  prepared: PreparedResponse;
  response: LiveResponse;
}

interface Admitted {
  builder: ResponseBuilder;
  rateLimits: ChatRun["rateLimits"];
}

/**
 * Starts the run as the server's own work and waits for its admission: a refusal is the
 * creator's answer (nothing stored); once admitted the response is stored `queued`, and the run
 * goes on without the creator.
 */
async function startRun(deps: BackgroundDeps, starting: Starting): Promise<Admitted> {
  const { caller, body, prepared, response } = starting;
  let admitted: (value: Admitted) => void = () => {};
  const admission = new Promise<Admitted>((resolve) => (admitted = resolve));
  let stored: (ok: boolean) => void = () => {};
  const storing = new Promise<boolean>((resolve) => (stored = resolve));
  const ending = new Ending(response);
  const running = deps.runAsServer(async (shutdown) => {
    shutdown.addEventListener("abort", () => response.controller.abort(shutdown.reason), { once: true });
    const run = await deps.chat.start(caller, prepared.input, response.controller.signal, {
      requestId: response.id,
      api: "responses",
      onAdmitted: ({ serviceTier, systemFingerprint, rateLimits }) => {
        const info = { id: response.id, created: Math.floor(Date.now() / 1000), model: body.model, serviceTier, systemFingerprint };
        ending.builder = new ResponseBuilder(info, body, (type, payload) => ending.emitted(type, payload));
        admitted({ builder: ending.builder, rateLimits });
      },
    });
    if (await storing) return runToEnd(deps, run, ending, prepared.conversation);
    // Not stored (the run was stopped): its events still end it, so its sequence and ledger row are settled.
    for await (const event of run.events) void event;
  });
  // Admitted: store it and answer. Refused (before admission): the creator's error.
  const first = await Promise.race([admission, running.then(() => null)]);
  const afterAdmission = (error: unknown) =>
    ending.builder ? storing.then((ok) => (ok ? ending.fail(deps, error) : undefined)) : undefined;
  // A failure to store its failure too leaves it unfinished: failed at the next start, as a crash would.
  void running
    .catch(afterAdmission)
    .catch(() => {})
    .finally(() => response.finish());
  if (!first) throw new Error("the run ended before its admission");
  try {
    first.builder.queued();
    const queued = { ...prepared, body: stringifyJson(first.builder.snapshot("queued")), status: "queued" };
    await deps.store.create(caller.accountId, response.id, deps.ownerId, queued);
    stored(true);
  } catch (error) {
    stored(false);
    response.controller.abort(error);
    throw error;
  }
  return first;
}

/** How the run ends: its builder (made at admission), and the last event, held until the end is stored. */
class Ending {
  builder: ResponseBuilder | null = null;
  private last: { type: string; payload: Record<string, unknown> } | null = null;

  constructor(readonly response: LiveResponse) {}

  emitted(type: string, payload: Record<string, unknown>): void {
    if (["response.completed", "response.incomplete", "response.failed"].includes(type)) this.last = { type, payload };
    else this.response.push(type, payload);
  }

  /** Stores the end (after every event before it) and then sends its last event; false: it was no longer unfinished. */
  async store(deps: BackgroundDeps, response: ReturnType<ResponseBuilder["snapshot"]>, conversation?: ChatMessage[]): Promise<boolean> {
    if (this.response.stoppedBy === "delete") return true;
    await this.response.flush();
    const last = this.last;
    const lastEvent = last ? { seq: last.payload.sequence_number as number, data: stringifyJson(last.payload) } : undefined;
    const body = stringifyJson(response);
    const updated = await deps.store.update(this.response.id, { status: response.status, body, conversation, lastEvent });
    if (last) this.response.push(last.type, last.payload, true);
    return updated;
  }

  /** A run that failed (or was cancelled before it started) after admission. */
  async fail(deps: BackgroundDeps, error: unknown): Promise<void> {
    const cancelled = this.response.stoppedBy === "cancel";
    await this.store(deps, this.builder!.ended(cancelled ? "cancelled" : "failed", null, cancelled ? null : failureOf(error)));
  }
}

/** Consumes the run's events, as the response's; its end is stored with the conversation it completes. */
async function runToEnd(deps: BackgroundDeps, run: ChatRun, ending: Ending, conversation: ChatMessage[]): Promise<void> {
  const builder = ending.builder!;
  builder.inProgress();
  await deps.store.update(run.id, { status: "in_progress", body: stringifyJson(builder.snapshot("in_progress")) });
  let end: ReturnType<ResponseBuilder["snapshot"]> | null = null;
  try {
    for await (const event of run.events) {
      if (event.type === "done" && event.finishReason === "cancelled") end = builder.ended("cancelled", event.usage);
      else end = builder.apply(event) ?? end;
    }
  } catch (error) {
    end = builder.ended("failed", null, failureOf(error));
  }
  end ??= builder.ended("failed", null, { code: "server_error", message: "The generation ended without an answer." });
  const answered = end.status === "completed" || end.status === "incomplete";
  try {
    await ending.store(deps, end, answered ? [...conversation, builder.assistantMessage()] : undefined);
  } catch (error) {
    // Generated but not stored: its ledger row must not say completed.
    if (answered) await run.undelivered("response_not_stored").catch(() => {});
    throw error;
  }
}

function failureOf(error: unknown): ResponseError {
  const body = toErrorBody(
    error instanceof ServiceError ? error : new ServiceError(500, "server_error", "The generation failed.", "server_error"),
  );
  return { code: body.error.code ?? "server_error", message: body.error.message };
}

/** A response no run here holds: its stored events, then new ones as another process stores them, until it ends. */
async function* followStored(
  deps: BackgroundDeps,
  accountId: string,
  id: string,
  after: number,
  signal: AbortSignal,
): AsyncGenerator<Chunk> {
  let last = after;
  while (!signal.aborted) {
    const status = (await deps.responses.get(accountId, id))?.status;
    for (const event of await deps.store.eventsAfter(accountId, id, last)) {
      last = event.seq;
      const data = parseStoredEvent(event.data);
      yield { event: data.type as string, data };
    }
    if (!status || !UNFINISHED_STATUSES.has(status)) return;
    await new Promise((resolve) => setTimeout(resolve, STORED_POLL_MS));
  }
}
