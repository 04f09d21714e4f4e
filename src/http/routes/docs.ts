import { createRequire } from "node:module";
import { dirname } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import { declarePublic } from "../auth.js";
import { SECURITY_HEADERS } from "../console.js";
import { route, type RouteSpec } from "../route-spec.js";

/** Swagger UI's files come from the swagger-ui-dist package and are served from here: no CDN. */
const ASSETS = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Switchyard API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/start.js"></script>
</body>
</html>
`;

/** Not inline: the console's CSP (which /docs shares) allows scripts from this origin only. */
const START = `window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#reference", deepLinking: true });\n`;

/** These routes as data, collected into the OpenAPI document by openapi.ts; `assets` is served by @fastify/static. */
export const docsOperations = {
  document: {
    method: "get",
    path: "/openapi.json",
    id: "openapi",
    summary: "This document",
    auth: "none",
    response: { description: "OpenAPI 3.1." },
    errors: [],
  },
  page: {
    method: "get",
    path: "/docs",
    id: "docs",
    summary: "The rendered API reference",
    auth: "none",
    response: { description: "HTML.", contentType: "text/html" },
    errors: [],
  },
  start: {
    method: "get",
    path: "/docs/start.js",
    id: "docsStart",
    summary: "The reference page's start script (a file: the page's CSP allows no inline script)",
    auth: "none",
    response: { description: "JavaScript.", contentType: "text/javascript" },
    errors: [],
  },
  assets: {
    method: "get",
    path: "/docs/assets/{file}",
    id: "docsAssets",
    summary: "The reference page's scripts and styles (from swagger-ui-dist)",
    auth: "none",
    pathParams: [{ name: "file", description: "File name." }],
    response: { description: "The file.", contentType: "application/octet-stream" },
    errors: [404],
  },
} satisfies Record<string, RouteSpec>;

export interface DocsOptions {
  /** The OpenAPI document (openapi.ts, which collects every route's declaration, this one's too). */
  document: (version: string) => Record<string, unknown>;
}

/** The OpenAPI document and its rendered reference page, both without auth. */
export async function docsRoutes(app: FastifyInstance, options: DocsOptions): Promise<void> {
  const { version } = createRequire(import.meta.url)("../../../package.json") as { version: string };
  const document = JSON.stringify(options.document(version));
  route(app, docsOperations.document, async (_request, reply) => reply.type("application/json; charset=utf-8").send(document));
  route(app, docsOperations.page, async (_request, reply) => reply.headers(SECURITY_HEADERS).type("text/html; charset=utf-8").send(PAGE));
  route(app, docsOperations.start, async (_request, reply) =>
    reply.headers(SECURITY_HEADERS).type("text/javascript; charset=utf-8").send(START),
  );
  declarePublic(app);
  await app.register(fastifyStatic, {
    root: ASSETS,
    prefix: "/docs/assets/",
    allowedPath: (path) => /^\/[\w.-]+\.(js|css|png)$/.test(path),
    setHeaders(reply) {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
    },
  });
}
