/** Values a trace may carry: counts, names and ids, never a key, a prompt or a completion's text. */
export type TraceAttributes = Record<string, string | number | boolean | string[]>;

/** A stage of a request, traced as a child of its span from when it began until `end`. */
export interface TraceStage {
  end(attributes?: TraceAttributes): void;
}

/**
 * One request's trace, as serving reports to it (observability/tracing.ts implements it; with
 * tracing off every call is a no-op, see UNTRACED in run-trace.ts).
 */
export interface RequestTrace {
  /** Attributes of the request's own span. */
  annotate(attributes: TraceAttributes): void;
  /** A stage beginning now (admission, queue, prefill, decode, the ledger write). */
  stage(name: string): TraceStage;
  /** Runs `work` inside the request's span, so the calls it makes to upstream engines are its children. */
  within<T>(work: () => T): T;
}
