/**
 * One endpoint as data: what it is (method, path, auth, schemas, answer, errors) and how it runs. The
 * HTTP layer registers every declaration with one adapter (http/endpoint-routes.ts), which enforces
 * the declared auth, parses with the declared schemas and writes the answer; the OpenAPI document
 * reads the same declarations. `run` knows nothing of HTTP, so an endpoint is testable as a plain
 * function.
 */
import type { z } from "zod";
import type { Principal } from "../protocol/principal.js";
import type { RateLimitState } from "../protocol/rate-limit-headers.js";

export type Method = "get" | "post" | "patch" | "delete";
export type Auth = "key" | "admin" | "none";

/** A query parameter written out, for a query no zod object validates. */
export interface QueryParam {
  name: string;
  description: string;
  /** Its JSON Schema; default a string. */
  schema?: Record<string, unknown>;
}

/** What describes an endpoint without running it: what the route adapter and the OpenAPI document read. */
export interface EndpointSpec {
  method: Method;
  /** OpenAPI's form, relative to the API prefix where there is one: `/v1/keys/{id}`, `/files/{id}`. */
  path: string;
  /**
   * Fastify's path where it is not `path` with `{x}` as `:x`: a trailing wildcard for an id that
   * holds a slash (`/models/*`); the wildcard's value reaches `run` under the first path parameter's name.
   */
  route?: string;
  /** operationId; under the API prefixes it gets a suffix per prefix (openapi.ts). */
  id: string;
  summary: string;
  /**
   * Enforced by the auth hook (http/auth.ts): "key" needs an API key, whose principal `run` gets;
   * "admin" needs the admin key (checked in the admin routes' scope), which names no account, so
   * `run` gets no caller (null).
   */
  auth: Auth;
  /** The body's zod schema (protocol/): the adapter parses the body with it before `run`. */
  body?: z.ZodType;
  /** An absent body is taken as `{}` (else a 400 missing_body). */
  bodyOptional?: boolean;
  /** The body's media type; default application/json. */
  bodyType?: string;
  /**
   * A multipart/form-data body, read as it streams: `run` gets its parts (protocol/form-parts.ts),
   * the files of `files` among them (any other file is drained unread). A body of another type is
   * a 400 saying `notMultipart`; what the parser cannot read is a 400 naming `param`.
   */
  form?: { files: readonly string[]; param: string; notMultipart: { message: string; param: string | null } };
  /** Query parameters: the zod object (protocol/) the adapter parses them with, or a list written out (see `parseQuery`). */
  query?: z.ZodObject | QueryParam[];
  pathParams?: Array<{ name: string; description: string }>;
  /** The success answer: JSON unless `contentType` says otherwise; `streams`: server-sent events on request too. */
  response: { description: string; contentType?: string; streams?: boolean };
  /** Error statuses it may answer with, each in the OpenAI error shape. */
  errors: number[];
  /** A line of a batch may call it (`url` in the batch input file). */
  batchable?: boolean;
}

/** What `run` receives: the path parameters, and the query and body as the declared schemas parsed them. */
export interface EndpointInput<Params = Record<string, string>, Query = unknown, Body = unknown> {
  params: Params;
  query: Query;
  body: Body;
}

/** What `run` answers; `rateLimits`: the key's windows as its admission left them (the rate-limit headers). */
export type EndpointAnswer = { status?: number; rateLimits?: RateLimitState } & (
  | { type: "json"; value: unknown }
  /** JSON already written out (exact decimals, or stored text sent as it was kept). */
  | { type: "json-text"; text: string }
  /** Bytes sent as they are read (a file's content), with their length where known; never compressed. */
  | { type: "bytes"; contentType: string; length?: number; chunks: AsyncIterable<Buffer> }
  /**
   * Server-sent events, followed until they end or the client leaves (`signal` aborts; what produced
   * them runs on). A failure after the first is sent as an `error` event.
   */
  | { type: "events"; follow(signal: AbortSignal): AsyncIterable<{ event?: string; data: unknown }> }
);

/** Any endpoint's input: what a list of endpoints of different inputs holds. */
export type AnyInput = EndpointInput<unknown, unknown, unknown>;

/** `Caller`: the key's principal; null for an admin endpoint (auth "admin"), which no key calls. */
export interface Endpoint<Input extends AnyInput = AnyInput, Caller extends Principal | null = Principal> extends EndpointSpec {
  /** Checked before the input is parsed: a right the key lacks is a 403 whatever the body holds. */
  authorize?(caller: Caller): void;
  /** For a query no zod object describes (the `query` list documents it). */
  parseQuery?(raw: Record<string, unknown>): Input["query"];
  run(caller: Caller, input: Input): Promise<EndpointAnswer>;
}

/** An endpoint behind the admin key (auth "admin"): it runs for the operator, with no caller. */
export type AdminEndpoint<Input extends AnyInput = AnyInput> = Endpoint<Input, null> & { auth: "admin" };

export const json = (value: unknown, status?: number): EndpointAnswer => ({ type: "json", value, ...(status ? { status } : {}) });
export const jsonText = (text: string): EndpointAnswer => ({ type: "json-text", text });
export const bytes = (chunks: AsyncIterable<Buffer>, contentType: string, length?: number): EndpointAnswer => ({
  type: "bytes",
  contentType,
  chunks,
  ...(length === undefined ? {} : { length }),
});
export const events = (follow: (signal: AbortSignal) => AsyncIterable<{ event?: string; data: unknown }>): EndpointAnswer => ({
  type: "events",
  follow,
});
