/**
 * GET /v1/usage?start=&end=&group_by=model|day|key: the calling key's own account's usage, never
 * anyone else's. start is inclusive, end exclusive; each is Unix seconds or an ISO 8601 date or
 * date-time (UTC unless it has an offset). Costs are exact JSON numbers. Dedicated instance time
 * is reported apart, under `deployments`.
 */
import { stringifyJson } from "../../protocol/money-json.js";
import { toWireUsageReport, type UsageReports } from "../../protocol/usage.js";
import { parseUsageParams, USAGE_QUERY } from "../../protocol/usage-request.js";
import { jsonText, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";

export const usageSpecs = {
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
} satisfies Record<string, EndpointSpec>;

export function usageEndpoints(usage: UsageReports): Endpoint[] {
  const get: Endpoint<EndpointInput<unknown, ReturnType<typeof parseUsageParams>>> = {
    ...usageSpecs.get,
    parseQuery: parseUsageParams,
    async run(caller, { query }) {
      const report = await usage.ofAccount(caller.accountId, query);
      return jsonText(stringifyJson(toWireUsageReport(report, query)));
    },
  };
  return [get];
}
