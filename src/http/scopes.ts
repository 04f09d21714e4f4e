/**
 * The transport scopes the api/ registry names (api/registry.ts `Scope`), made here: http/ knows
 * the kinds of scope, never the resources. Each resource served is registered in the scope its
 * entry names, where its entry mounts it.
 */
import type { FastifyMultipartOptions } from "@fastify/multipart";
import type { FastifyInstance } from "fastify";
import type { AdminEndpoint, Endpoint } from "../api/endpoint.js";
import type { Mount, Scope, Served, UploadBounds } from "../api/registry.js";
import type { Tracing } from "../observability/tracing.js";
import { registerEndpoints, registerUploadEndpoints } from "./endpoint-routes.js";
import { generationRoutes } from "./routes/generation.js";
import type { StreamLimits } from "./sse.js";
import { installTracing } from "./tracing.js";
import { UploadGate } from "./upload-gate.js";

/** What the scopes are made with: the deployment forwarding, the tracing (absent: off), the streams' limits. */
export interface ScopeContext {
  forward(scope: FastifyInstance): void;
  tracing?: Tracing;
  streams: StreamLimits;
}

/** A resource served, with its upload gate and parser limits when it reads uploads. */
export type Mounted = Served & { upload?: UploadOptions };

/**
 * The resources served at one place, each in the scope the registry names: as they are, or in a
 * child scope per kind (forwarded; forwarded and traced), each upload with its own gate and parser.
 */
export function registerScopes(parent: FastifyInstance, resources: Mounted[], context: ScopeContext): void {
  const inScope = (scope: Scope) => resources.filter((resource) => resource.scope === scope);
  for (const resource of [...inScope("plain"), ...inScope("uploads")]) register(parent, resource, context);
  for (const scope of ["forwarded", "forwarded and traced"] as const) {
    const group = inScope(scope);
    if (group.length === 0) continue;
    void parent.register(async (child) => {
      context.forward(child);
      if (scope === "forwarded and traced" && context.tracing) installTracing(child, context.tracing);
      for (const resource of group) register(child, resource, context);
    });
  }
}

function register(scope: FastifyInstance, resource: Mounted, context: ScopeContext): void {
  if ("operations" in resource) generationRoutes(scope, resource.operations, context.streams);
  else if (resource.scope !== "uploads") registerEndpoints(scope, resource.endpoints);
  // The registry gives every resource of the upload scope its bounds: one without is a mistake there.
  else if (!resource.upload) throw new Error(`${resource.resource}: in the upload scope with no upload bounds (api/registry.ts)`);
  else registerUploadEndpoints(scope, resource.endpoints, resource.upload.gate, resource.upload.limits);
}

interface UploadOptions {
  gate: UploadGate;
  limits: NonNullable<FastifyMultipartOptions["limits"]>;
}

/**
 * A resource's uploads: one gate for the process, under every prefix (an account's and the
 * process's caps hold across them); the parser lets a file one byte past its limit through, so the
 * service sees the limit passed and answers 413.
 */
function uploadOptions(bounds: UploadBounds): UploadOptions {
  const { maxFileBytes, files, fields, parts } = bounds;
  return { gate: new UploadGate(bounds), limits: { fileSize: maxFileBytes + 1, files, fields, fieldSize: 1024, parts, headerPairs: 64 } };
}

/**
 * The resources served, ready to mount: `at(...mounts)` those mounted there (the admin ones aside),
 * `admin()` those behind the admin key. Upload gates are made here, once, so each holds across the prefixes.
 */
export function mountable(served: Served[]) {
  const mounted: Mounted[] = served.map((resource) =>
    "uploads" in resource && resource.uploads ? { ...resource, upload: uploadOptions(resource.uploads) } : resource,
  );
  return {
    at: (...mounts: Mount[]) => mounted.filter((resource) => mounts.includes(resource.mount) && resource.scope !== "admin"),
    admin: (): Array<Endpoint | AdminEndpoint> =>
      mounted.flatMap((resource) => (resource.scope === "admin" && "endpoints" in resource ? resource.endpoints : [])),
  };
}
