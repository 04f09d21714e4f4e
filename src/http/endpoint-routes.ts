/**
 * The one route adapter: registers declared endpoints (api/endpoint.ts). The auth hook enforces the
 * declared auth (route config); here the declared schemas parse the path, query and body, `run`
 * gets the parsed input, and its answer is written with its status and rate-limit headers.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Endpoint, EndpointAnswer, EndpointInput, EndpointSpec } from "../api/endpoint.js";
import { parse } from "../protocol/parse-input.js";
import { parseRequest } from "../protocol/parse-request.js";
import { rateLimitHeaders } from "../protocol/rate-limit-headers.js";
import { callerOf } from "./auth.js";
import { route } from "./route-spec.js";

export function registerEndpoints(app: FastifyInstance, endpoints: Iterable<Endpoint>): void {
  for (const endpoint of endpoints) {
    route(app, endpoint, async (request, reply) => {
      // Rights first: a key that lacks one is refused whatever its body holds.
      const caller = callerOf(request);
      endpoint.authorize?.(caller);
      return send(reply, await endpoint.run(caller, inputOf(endpoint, request)));
    });
  }
}

/** The request's parameters, query and body, each parsed as the endpoint declares (a 400 naming the parameter). */
export function inputOf(endpoint: Endpoint, request: FastifyRequest): EndpointInput {
  const raw = (request.query ?? {}) as Record<string, unknown>;
  return {
    params: pathParams(endpoint, request.params as Record<string, string>),
    query: endpoint.parseQuery
      ? endpoint.parseQuery(raw)
      : endpoint.query && !Array.isArray(endpoint.query)
        ? parse(endpoint.query, raw)
        : raw,
    body: !endpoint.body
      ? request.body
      : endpoint.bodyOptional
        ? parse(endpoint.body, request.body ?? {})
        : parseRequest(endpoint.body, request.body),
  };
}

/** A trailing wildcard's value (an id that holds a slash) under the declared parameter's name. */
function pathParams(spec: EndpointSpec, params: Record<string, string> = {}): Record<string, string> {
  const wildcard = params["*"];
  const name = spec.pathParams?.[0]?.name;
  return wildcard !== undefined && name ? { ...params, [name]: wildcard } : params;
}

function send(reply: FastifyReply, answer: EndpointAnswer): FastifyReply {
  // Set before the body is sent; the rate-limit hook (rate-limit-headers.ts) then leaves them be.
  if (answer.rateLimits) reply.headers(rateLimitHeaders(answer.rateLimits));
  if (answer.status) reply.code(answer.status);
  if (answer.type === "json-text") return reply.type("application/json; charset=utf-8").send(answer.text);
  return reply.send(answer.value);
}
