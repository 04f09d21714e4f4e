import { existsSync } from "node:fs";
import { resolve } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import { declarePublic } from "./auth.js";
import { ServiceError } from "../errors.js";
import { route, type RouteSpec } from "./route-spec.js";

/** The built console (console/ → vite → dist/console), the same path from src/ (tsx) and dist/. */
export const CONSOLE_DIR = resolve(import.meta.dirname, "../../dist/console");

/**
 * Only files from this server, no inline script or style, no framing, no form posts elsewhere:
 * a key in the page can only be sent back to this origin.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** The console's headers; /docs (the API reference page and its assets) gets the same set. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
};

/** These routes as data, collected into the OpenAPI document by openapi.ts; `files` is served by @fastify/static (or, unbuilt, answered 404 below). */
export const consoleOperations = {
  redirect: {
    method: "get",
    path: "/console",
    id: "console",
    summary: "The web console (redirects to /console/)",
    auth: "none",
    response: { description: "A redirect.", contentType: "text/html" },
    errors: [],
  },
  files: {
    method: "get",
    path: "/console/{file}",
    route: "/console/*",
    id: "consoleFiles",
    summary: "The web console's page and assets",
    auth: "none",
    pathParams: [{ name: "file", description: "File path." }],
    response: { description: "The file.", contentType: "application/octet-stream" },
    errors: [404],
  },
} satisfies Record<string, RouteSpec>;

/**
 * The web console: static files under /console/, served by this same server. Every call it makes
 * is an ordinary API call with the signed-in key, so it can do nothing the key could not.
 */
export async function consoleRoutes(app: FastifyInstance, options: { dir?: string } = {}): Promise<void> {
  const dir = options.dir ?? CONSOLE_DIR;
  route(app, consoleOperations.redirect, async (_request, reply) => reply.redirect("/console/", 301));
  if (!existsSync(resolve(dir, "index.html"))) {
    route(app, consoleOperations.files, async () => {
      throw new ServiceError(
        404,
        "not_found_error",
        "The console is not built. Run 'npm install' (or 'npm run build:console') and restart.",
        "console_not_built",
      );
    });
    return;
  }
  declarePublic(app);
  await app.register(fastifyStatic, {
    root: dir,
    prefix: "/console/",
    decorateReply: false,
    index: ["index.html"],
    cacheControl: false,
    // Hashed asset names change with their content; the page itself is always re-read.
    setHeaders(reply, path) {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
      reply.header("cache-control", path.includes("/assets/") ? "public, max-age=31536000, immutable" : "no-cache");
    },
  });
}
