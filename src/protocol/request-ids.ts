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
  return `${PREFIX[kind]}${randomId()}`;
}

/** Random bytes in an id: 144 bits, 24 characters of base64url. */
const ID_BYTES = 18;
/** Ids drawn from one call to the CSPRNG (as Node's randomUUID keeps a cache): one call a request cost 2% of the main thread's CPU. */
const IDS_PER_DRAW = 256;
let pool = Buffer.alloc(0);
let offset = 0;

function randomId(): string {
  if (offset + ID_BYTES > pool.length) {
    pool = randomBytes(ID_BYTES * IDS_PER_DRAW);
    offset = 0;
  }
  const id = pool.toString("base64url", offset, offset + ID_BYTES);
  offset += ID_BYTES;
  return id;
}
