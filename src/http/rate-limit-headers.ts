import type { FastifyInstance, FastifyReply } from "fastify";
import { rateLimitHeaders } from "../protocol/rate-limit-headers.js";
import type { ChatRun } from "../serving/types.js";
import type { RequestLimits } from "../limits/ports.js";

/**
 * OpenAI's `x-ratelimit-*` headers on every response to a key that has a per-minute limit. A
 * generation (and a 429 from the limiter) reports the windows as its admission left them; every
 * other response (a 400, a list, a 429 for a full queue) reads them without taking anything. Set
 * before a stream's head is written (sse.ts copies the reply's headers), so streams carry them too.
 */
export function exposeRateLimits(reply: FastifyReply, run: Pick<ChatRun, "rateLimits">): void {
  reply.headers(rateLimitHeaders(run.rateLimits));
}

export function installRateLimitHeaders(app: FastifyInstance, limits: Pick<RequestLimits, "peek">): void {
  const peek = limits.peek;
  if (!peek) return;
  app.addHook("onSend", async (request, reply, payload) => {
    const caller = request.caller;
    if (!caller || reply.hasHeader("x-ratelimit-limit-requests") || reply.hasHeader("x-ratelimit-limit-tokens")) return payload;
    try {
      reply.headers(rateLimitHeaders(await peek({ keyId: caller.keyId, limits: caller.limits })));
    } catch (error) {
      // The answer matters more than its headers: a limiter that cannot be read leaves them out.
      request.log.warn({ err: error }, "could not read the rate-limit windows");
    }
    return payload;
  });
}
