import type { FastifyInstance, FastifyReply } from "fastify";
import type { RequestLimits } from "../limits/ports.js";
import { rateLimitHeaders, type RateLimitState } from "../protocol/rate-limit-headers.js";

declare module "fastify" {
  interface FastifyReply {
    /** The answer carries the windows as its admission left them (none, for a key without per-minute limits): the hook below reads nothing. */
    rateLimitsTold: boolean;
  }
}

/** The admission's windows as the answer's headers; undefined (no admission) leaves them to the hook. */
export function tellRateLimits(reply: FastifyReply, state: RateLimitState | undefined): void {
  if (!state) return;
  reply.headers(rateLimitHeaders(state));
  reply.rateLimitsTold = true;
}

/**
 * OpenAI's `x-ratelimit-*` headers on every response to a key that has a per-minute limit. A
 * generation (and a 429 from the limiter) reports the windows as its admission left them; every
 * other response (a 400, a list, a 429 for a full queue) reads them without taking anything. Set
 * before a stream's head is written (sse.ts copies the reply's headers), so streams carry them too.
 */
export function installRateLimitHeaders(app: FastifyInstance, limits: Pick<RequestLimits, "peek">): void {
  app.decorateReply("rateLimitsTold", false);
  const peek = limits.peek;
  if (!peek) return;
  // `done` rather than async: a response that already carries its admission's windows (every
  // generation's, every embedding's) goes on at once, without asking the limiter again.
  app.addHook("onSend", (request, reply, payload, done) => {
    const caller = request.caller;
    if (!caller || reply.rateLimitsTold || reply.hasHeader("x-ratelimit-limit-requests") || reply.hasHeader("x-ratelimit-limit-tokens"))
      return done(null, payload);
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
