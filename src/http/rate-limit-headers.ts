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
  // `done` rather than async: a response that already carries its headers (every generation's) goes on at once.
  app.addHook("onSend", (request, reply, payload, done) => {
    const caller = request.caller;
    if (!caller || reply.hasHeader("x-ratelimit-limit-requests") || reply.hasHeader("x-ratelimit-limit-tokens")) return done(null, payload);
    peek({ keyId: caller.keyId, limits: caller.limits }).then(
      (state) => {
        reply.headers(rateLimitHeaders(state));
        done(null, payload);
      },
      (error: unknown) => {
        // The answer matters more than its headers: a limiter that cannot be read leaves them out.
        request.log.warn({ err: error }, "could not read the rate-limit windows");
        done(null, payload);
      },
    );
  });
}
