import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods, RouteGenericInterface, RouteShorthandOptions } from "fastify";
import type { z } from "zod";

export type Method = "get" | "post" | "patch" | "delete";
export type Auth = "key" | "admin" | "none";

/** A query parameter written out, for a query no zod object validates. */
export interface QueryParam {
  name: string;
  description: string;
  /** Its JSON Schema; default a string. */
  schema?: Record<string, unknown>;
}

/**
 * One HTTP operation as data, declared once beside its handler: `route` registers the handler with
 * it, and openapi.ts collects every declaration into the OpenAPI document.
 */
export interface RouteSpec {
  method: Method;
  /** OpenAPI's form, relative to the API prefix where there is one: `/v1/keys/{id}`, `/files/{id}`. */
  path: string;
  /**
   * Fastify's path where it is not `path` with `{x}` as `:x`: a trailing wildcard for an id that
   * holds a slash (`/models/*`).
   */
  route?: string;
  /** operationId; under the API prefixes it gets a suffix per prefix (openapi.ts). */
  id: string;
  summary: string;
  auth: Auth;
  /** The zod schema (protocol/) the handler validates its body with. */
  body?: z.ZodType;
  /** The body's media type; default application/json. */
  bodyType?: string;
  /** Query parameters: the zod object (protocol/) the handler validates them with, or a list written out. */
  query?: z.ZodObject | QueryParam[];
  pathParams?: Array<{ name: string; description: string }>;
  /** The success answer: JSON unless `contentType` says otherwise; `streams`: server-sent events on request too. */
  response: { description: string; contentType?: string; streams?: boolean };
  /** Error statuses it may answer with, each in the OpenAI error shape. */
  errors: number[];
}

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
