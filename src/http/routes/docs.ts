import { createRequire } from "node:module";
import { dirname } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import { SECURITY_HEADERS } from "../console.js";
import { openApiDocument } from "../openapi.js";

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

/** The OpenAPI document and its rendered reference page, both without auth. */
export async function docsRoutes(app: FastifyInstance): Promise<void> {
  const { version } = createRequire(import.meta.url)("../../../package.json") as { version: string };
  const document = JSON.stringify(openApiDocument(version));
  app.get("/openapi.json", async (_request, reply) => reply.type("application/json; charset=utf-8").send(document));
  app.get("/docs", async (_request, reply) => reply.headers(SECURITY_HEADERS).type("text/html; charset=utf-8").send(PAGE));
  app.get("/docs/start.js", async (_request, reply) => reply.headers(SECURITY_HEADERS).type("text/javascript; charset=utf-8").send(START));
  await app.register(fastifyStatic, {
    root: ASSETS,
    prefix: "/docs/assets/",
    allowedPath: (path) => /^\/[\w.-]+\.(js|css|png)$/.test(path),
    setHeaders(reply) {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
    },
  });
}
