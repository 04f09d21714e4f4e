import { z } from "zod";
import { RATE_LIMIT_HEADER_NAMES } from "../protocol/rate-limit-headers.js";
import { specsMounted } from "../api/registry.js";
import { API_PREFIXES } from "./api-paths.js";
import { consoleOperations } from "./console.js";
import type { Auth, Method, RouteSpec } from "./route-spec.js";
import { docsOperations } from "./routes/docs.js";
import { healthOperations } from "./routes/health.js";
import { metricsOperations } from "./routes/metrics.js";

/**
 * The OpenAPI document, generated from the operations each route declares beside its handler
 * (route-spec.ts) and the api/ registry's specs: nothing here is written twice.
 */

/** The same shape every error has (src/http/errors.ts). */
const errorSchema = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
});

/** The OpenAI-compatible operations, served under every prefix in API_PREFIXES, in the document's order. */
const API_OPERATIONS: RouteSpec[] = specsMounted("prefixes", "prefixes and root");

/** Everything served at its own path: the API's resources, the pages http/ serves itself, the admin API last. */
const ownPath = specsMounted("own path");
const OTHER_OPERATIONS: RouteSpec[] = [
  ...ownPath.filter((op) => op.auth !== "admin"),
  ...Object.values(consoleOperations),
  ...Object.values(healthOperations),
  ...Object.values(metricsOperations),
  ...Object.values(docsOperations),
  ...ownPath.filter((op) => op.auth === "admin"),
];

/** A zod schema as the JSON Schema (2020-12, as OpenAPI 3.1 uses) of what a client may send. */
function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  return rest;
}

const RATE_LIMIT_HEADERS = Object.fromEntries(RATE_LIMIT_HEADER_NAMES.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

const HEADER_TEXT: Record<string, string> = {
  limit: "The key's per-minute limit",
  remaining: "What is left of it after this request",
  reset: "How long until everything taken in the window has aged out (a duration: `850ms`, `6s`, `1m0s`)",
};

const SECURITY: Record<Auth, Array<Record<string, string[]>>> = {
  key: [{ bearerKey: [] }, { apiKeyHeader: [] }, { xApiKeyHeader: [] }],
  admin: [{ adminBearer: [] }],
  none: [],
};

function queryParameters(query: RouteSpec["query"]) {
  if (!query) return [];
  if (Array.isArray(query))
    return query.map((p) => ({
      name: p.name,
      in: "query",
      required: false,
      description: p.description,
      schema: p.schema ?? { type: "string" },
    }));
  const schema = jsonSchema(query) as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({
    name,
    in: "query",
    required: schema.required?.includes(name) ?? false,
    schema: property,
  }));
}

function operationObject(op: RouteSpec, operationId: string) {
  const ok = op.response.streams
    ? { "application/json": { schema: { type: "object" } }, "text/event-stream": { schema: { type: "string" } } }
    : { [op.response.contentType ?? "application/json"]: { schema: op.response.contentType ? { type: "string" } : { type: "object" } } };
  const errors = Object.fromEntries(op.errors.map((status) => [String(status), { $ref: "#/components/responses/Error" }]));
  const parameters = [
    ...(op.pathParams ?? []).map((p) => ({
      name: p.name,
      in: "path",
      required: true,
      description: p.description,
      schema: { type: "string" },
    })),
    ...queryParameters(op.query),
  ];
  return {
    operationId,
    summary: op.summary,
    security: SECURITY[op.auth],
    ...(parameters.length ? { parameters } : {}),
    ...(op.body
      ? { requestBody: { required: true, content: { [op.bodyType ?? "application/json"]: { schema: jsonSchema(op.body) } } } }
      : {}),
    // Every response to a key with a per-minute limit carries the rate-limit headers.
    responses: {
      "200": { description: op.response.description, content: ok, ...(op.auth === "key" ? { headers: RATE_LIMIT_HEADERS } : {}) },
      ...errors,
    },
  };
}

/**
 * The OpenAPI 3.1 document. Request bodies come from the zod schemas the routes validate with, so
 * the document cannot drift from what is accepted. The API operations appear under every prefix.
 */
export function openApiDocument(version: string): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: {
      title: "Switchyard",
      version,
      description: "OpenAI-compatible chat completions, completions and responses on embedded llama.cpp models.",
    },
    paths: documentPaths(),
    components: {
      securitySchemes: SECURITY_SCHEMES,
      schemas: { Error: jsonSchema(errorSchema) },
      headers: rateLimitHeaders(),
      responses: {
        Error: {
          description: "An error in the OpenAI shape. Every response carries `x-request-id`.",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
    },
  };
}

function documentPaths(): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {};
  const add = (path: string, method: Method, operation: unknown) => ((paths[path] ??= {})[method] = operation);
  for (const op of API_OPERATIONS) {
    for (const prefix of API_PREFIXES) {
      const suffix = prefix === "/v1/compat" ? "" : prefix === "/v1/openai" ? "_openai" : "_v1";
      add(prefix + op.path, op.method, operationObject(op, op.id + suffix));
    }
  }
  for (const op of OTHER_OPERATIONS) add(op.path, op.method, operationObject(op, op.id));
  // The token endpoints are served at the root too, where vLLM and llama-server serve them.
  for (const op of specsMounted("prefixes and root")) add(op.path, op.method, operationObject(op, `${op.id}_root`));
  return paths;
}

const SECURITY_SCHEMES = {
  bearerKey: { type: "http", scheme: "bearer", description: "An API key: `Authorization: Bearer KEY`." },
  apiKeyHeader: { type: "apiKey", in: "header", name: "api-key", description: "The same key, Azure-style." },
  xApiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key", description: "The same key." },
  adminBearer: {
    type: "http",
    scheme: "bearer",
    description:
      "The admin key (SWITCHYARD_ADMIN_KEY, at least 32 characters, or server.json). Failed attempts are throttled per client IP: 429 admin_auth_throttled with Retry-After.",
  },
};

function rateLimitHeaders() {
  return Object.fromEntries(
    RATE_LIMIT_HEADER_NAMES.map((name) => {
      const [, part, kind] = /^x-ratelimit-(\w+)-(\w+)$/.exec(name)!;
      return [
        name,
        {
          description: `${HEADER_TEXT[part!]} (${kind}); sent only for a key with a ${kind}-per-minute limit, on errors and streams too.`,
          schema: { type: "string" },
        },
      ];
    }),
  );
}
