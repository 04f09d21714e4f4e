import type { FastifyInstance } from "fastify";
import { LINE_TOKEN_PREFIX, newLineToken, type LineIdentity, type LinePasses } from "../accounts/batch-line-passes.js";
import type { LineExecutor } from "../batches/runner.js";
import type { Authenticate } from "./auth.js";
import type { Principal } from "../protocol/principal.js";

/** The batch's key as it stands now: null once it is revoked or expired, or its account disabled. */
export type PrincipalOf = (keyId: string) => Promise<Omit<Principal, "batchId"> | null>;

/** A line token is this long; anything else with the prefix costs no query. */
const LINE_TOKEN_LENGTH = newLineToken().length;

/**
 * Batch lines enter the API as in-process requests (Fastify's inject: no socket), so they take
 * exactly the path a client's request takes: body checks, the request lifecycle, limits, budget
 * reservation and the ledger. Each line is authorized by a one-time token that exists only in this
 * process's memory, naming the batch's key and the batch (which makes the request a batch line:
 * batch tier, batch price, batch id on its ledger row). A line for a deployment that another server
 * process runs is forwarded there with a one-time pass from the database instead (`passFor`).
 */
export class BatchLineCallers {
  private readonly callers = new Map<string, Principal>();

  constructor(
    private readonly principalOf: PrincipalOf,
    private readonly passes: LinePasses,
  ) {}

  /** Recognizes line tokens (this process's, and passes from other processes) before the real key check. */
  authenticate(next: Authenticate): Authenticate {
    return async (token) => {
      if (!token.startsWith(LINE_TOKEN_PREFIX)) return next(token);
      const local = this.callers.get(token);
      if (local) return local;
      if (token.length !== LINE_TOKEN_LENGTH) return null;
      const identity = await this.passes.redeem(token);
      return identity ? this.callerFor(identity) : null;
    };
  }

  /** The bearer token that carries a batch line to another server process; null for a client's own request. */
  async passFor(caller: Principal): Promise<string | null> {
    return caller.batchId === undefined
      ? null
      : this.passes.issue({ keyId: caller.keyId, accountId: caller.accountId, batchId: caller.batchId });
  }

  /** The executor the batch runner uses. A line whose key is no longer valid is answered 401. */
  executor(app: FastifyInstance): LineExecutor {
    return async (line) => {
      const caller = await this.callerFor(line);
      if (!caller) {
        const error = {
          message: "The API key that created this batch is no longer valid (revoked or expired, or its account disabled).",
          type: "authentication_error",
          param: null,
          code: "invalid_api_key",
        };
        return { statusCode: 401, body: JSON.stringify({ error }), requestId: null, code: error.code };
      }
      const token = newLineToken();
      this.callers.set(token, caller);
      try {
        const response = await app.inject({
          method: "POST",
          url: `/v1${line.endpoint.slice("/v1".length)}`,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          payload: line.body,
        });
        const requestId = response.headers["x-request-id"];
        return {
          statusCode: response.statusCode,
          body: response.body,
          requestId: typeof requestId === "string" ? requestId : null,
          code: errorCode(response.body),
        };
      } finally {
        this.callers.delete(token);
      }
    };
  }

  private async callerFor(identity: LineIdentity): Promise<Principal | null> {
    const principal = await this.principalOf(identity.keyId);
    return principal && principal.accountId === identity.accountId ? { ...principal, batchId: identity.batchId } : null;
  }
}

function errorCode(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown } };
    return typeof parsed.error?.code === "string" ? parsed.error.code : null;
  } catch {
    return null;
  }
}
