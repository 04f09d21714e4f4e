import type { FastifyInstance } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import { toWireUsageReport, type UsageReports } from "../../protocol/usage.js";
import { parseUsageParams, USAGE_QUERY } from "../../protocol/usage-request.js";
import { callerOf } from "../auth.js";
import { route, type RouteSpec } from "../route-spec.js";

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const usageOperations = {
  get: {
    method: "get",
    path: "/v1/usage",
    id: "getUsage",
    summary: "The caller's account's usage and exact cost",
    auth: "key",
    query: USAGE_QUERY,
    response: { description: "Totals and groups." },
    errors: [400, 401],
  },
} satisfies Record<string, RouteSpec>;

/**
 * GET /v1/usage?start=&end=&group_by=model|day|key: the calling key's own account's usage, never
 * anyone else's. start is inclusive, end exclusive; each is Unix seconds or an ISO 8601 date or
 * date-time (UTC unless it has an offset). Costs are exact JSON numbers. Dedicated instance time
 * is reported apart, under `deployments`.
 */
export function usageRoutes(app: FastifyInstance, usage: UsageReports): void {
  route(app, usageOperations.get, async (request, reply) => {
    const { accountId } = callerOf(request);
    const params = parseUsageParams(request.query);
    const report = await usage.ofAccount(accountId, params);
    return reply.type("application/json; charset=utf-8").send(stringifyJson(toWireUsageReport(report, params)));
  });
}
