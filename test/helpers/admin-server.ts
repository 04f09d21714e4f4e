import Fastify, { type FastifyInstance } from "fastify";
import { ServiceError } from "../../src/errors.js";
import { adminEndpoints } from "../../src/api/admin/endpoints.js";
import { adminRoutes } from "../../src/http/routes/admin.js";
import { createAccountAdmin } from "../../src/accounts/account-admin.js";
import { createUsageReports } from "../../src/billing/usage-reports.js";
import type { Database } from "../../src/storage/database.js";

/**
 * A real Fastify server with the admin routes on 127.0.0.1 and a random port. The error handler is
 * a stand-in for the service's own: ServiceError to its status and the OpenAI error body.
 */
export async function startAdminServer(
  db: Database,
  adminToken: string,
): Promise<{ app: FastifyInstance; url: string; requests: string[] }> {
  const app = Fastify();
  /** "METHOD /path" of every request served, so tests can tell a call went over HTTP. */
  const requests: string[] = [];
  app.addHook("onRequest", async (request) => {
    requests.push(`${request.method} ${request.url}`);
  });
  app.setErrorHandler((error, _request, reply) => {
    if (error instanceof ServiceError) {
      return reply.code(error.status).send({ error: { message: error.message, type: error.type, param: error.param, code: error.code } });
    }
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    const message = error instanceof Error ? error.message : String(error);
    return reply
      .code(status)
      .send({ error: { message, type: status < 500 ? "invalid_request_error" : "server_error", param: null, code: null } });
  });
  await app.register(adminRoutes, { endpoints: adminEndpoints(createAccountAdmin(db), createUsageReports(db)), adminToken });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, url, requests };
}
