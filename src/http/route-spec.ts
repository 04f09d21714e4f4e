import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods, RouteGenericInterface, RouteShorthandOptions } from "fastify";
import type { EndpointSpec } from "../api/endpoint.js";

/** The one declaration type lives in api/endpoint.ts; the routes not yet moved there declare with it under this name. */
export type { Auth, Method, QueryParam } from "../api/endpoint.js";
export type RouteSpec = EndpointSpec;

/** Fastify's form of an operation's path. */
export function fastifyPath(op: Pick<RouteSpec, "path" | "route">): string {
  return op.route ?? op.path.replace(/\{(\w+)\}/g, ":$1");
}

/** Registers `handler` for the operation's method and path. */
export function route<G extends RouteGenericInterface = RouteGenericInterface>(
  app: FastifyInstance,
  op: RouteSpec,
  handler: (request: FastifyRequest<G>, reply: FastifyReply) => Promise<unknown>,
  options: RouteShorthandOptions = {},
): void {
  app.route<G>({
    ...options,
    method: op.method.toUpperCase() as HTTPMethods,
    url: fastifyPath(op),
    // The auth hook (auth.ts) reads the declared auth from here.
    config: { ...options.config, auth: op.auth },
    handler: handler as never,
  });
}
