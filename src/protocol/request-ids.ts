import { randomBytes } from "node:crypto";

/** Which public API a request came through; the ledger records it. */
export type ApiKind = "chat.completions" | "completions" | "responses" | "embeddings";

const PREFIX: Record<ApiKind | "other", string> = {
  "chat.completions": "chatcmpl-",
  completions: "cmpl-",
  responses: "resp_",
  // OpenAI's embeddings carry no id of their own: the request's is a plain one.
  embeddings: "req_",
  other: "req_",
};

/**
 * A request's id, as OpenAI shapes them. The same id is the `x-request-id` header, the completion's
 * `id` and the ledger row's key, so an operator can find a request from a client's error report.
 */
export function newRequestId(kind: ApiKind | "other"): string {
  return `${PREFIX[kind]}${randomBytes(18).toString("base64url")}`;
}
