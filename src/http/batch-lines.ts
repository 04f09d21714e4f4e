import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { LineExecutor } from "../batches/runner.js";
import type { ApiCaller, Authenticate } from "./auth.js";

/**
 * Batch lines enter the API as in-process requests (Fastify's inject: no socket), so they take
 * exactly the path a client's request takes: body checks, the request lifecycle, limits, budget
 * reservation and the ledger. Each line is authorized by a one-time token that exists only in this
 * process's memory, naming the batch's key and the batch (which makes the request a batch line:
 * batch tier, batch price, batch id on its ledger row).
 */
export class BatchLineCallers {
  private readonly callers = new Map<string, ApiCaller>();

  /** Recognizes the one-time tokens before the real key check. */
  authenticate(next: Authenticate): Authenticate {
    return async (token) => this.callers.get(token) ?? next(token);
  }

  /**
   * The executor the batch runner uses. `principalOf`: the batch's key as it stands now (null once
   * it is revoked or expired, or its account disabled: the line is then answered 401).
   */
  executor(app: FastifyInstance, principalOf: (keyId: string) => Promise<Omit<ApiCaller, "batchId"> | null>): LineExecutor {
    return async (line) => {
      const principal = await principalOf(line.keyId);
      if (!principal || principal.accountId !== line.accountId) {
        const error = { message: "The API key that created this batch is no longer valid (revoked or expired, or its account disabled).", type: "authentication_error", param: null, code: "invalid_api_key" };
        return { statusCode: 401, body: JSON.stringify({ error }), requestId: null, code: error.code };
      }
      const token = `sy-batch-${randomBytes(24).toString("base64url")}`;
      this.callers.set(token, { ...principal, batchId: line.batchId });
      try {
        const response = await app.inject({
          method: "POST",
          url: `/v1${line.endpoint.slice("/v1".length)}`,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          payload: line.body,
        });
        const requestId = response.headers["x-request-id"];
        return { statusCode: response.statusCode, body: response.body, requestId: typeof requestId === "string" ? requestId : null, code: errorCode(response.body) };
      } finally {
        this.callers.delete(token);
      }
    };
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
