/**
 * The query of `GET /v1/usage` and `GET /admin/v1/usage` (start, end, group_by), and the same times
 * as the CLI's flags take them.
 */
import { DateTime } from "luxon";
import { InvalidRequest } from "../errors.js";
import { USAGE_GROUP_BY, type ReportRange, type UsageGroupBy } from "./usage.js";

/** The query parameters as the OpenAPI document lists them (openapi.ts). */
export const USAGE_QUERY = [
  { name: "start", description: "Inclusive; Unix seconds or an ISO 8601 date or date-time." },
  { name: "end", description: "Exclusive; Unix seconds or an ISO 8601 date or date-time." },
  { name: "group_by", description: "`model`, `day` or `key`.", schema: { type: "string", enum: ["model", "day", "key"] } },
];

const UNIX_SECONDS = /^\d{1,12}(?:\.\d{1,9})?$/;

/**
 * A point in time from a query parameter or CLI flag: Unix seconds ("1735689600", fractions
 * allowed) or an ISO 8601 date ("2025-01-01", UTC midnight) or date-time ("2025-01-01T12:00:00Z",
 * "2025-01-01T14:00+02:00"; no offset means UTC). Throws InvalidRequest naming `param`.
 */
export function parseUsageTime(value: string, param: string): Date {
  const text = value.trim();
  if (UNIX_SECONDS.test(text)) {
    const [whole, fraction = ""] = text.split(".");
    return new Date(Number(whole) * 1000 + Number(`${fraction}000`.slice(0, 3)));
  }
  // A space may stand for the "T", and for an offset's "+": an unencoded "+" in a query string arrives as a space.
  const iso = text.replace(/^(\d{4}-\d{2}-\d{2}) /, "$1T").replace(/(:\d{2}(?:[.,]\d+)?) (\d{2}:?\d{2})$/, "$1+$2");
  const parsed = DateTime.fromISO(iso, { zone: "utc" });
  // 24:00 (the end of a day) is left out: the next day's 00:00 says the same without doubt.
  if (!parsed.isValid || /T24/i.test(iso)) {
    throw new InvalidRequest(
      `Invalid '${param}': expected Unix seconds or an ISO 8601 date or date-time (e.g. 2025-01-01 or 2025-01-01T00:00:00Z), got ${JSON.stringify(value)}.`,
      param,
    );
  }
  return parsed.toJSDate();
}

export function parseGroupBy(value: string, param = "group_by"): UsageGroupBy {
  const text = value.trim() as UsageGroupBy;
  if (!USAGE_GROUP_BY.includes(text)) {
    throw new InvalidRequest(`Invalid '${param}': expected one of ${USAGE_GROUP_BY.join(", ")}, got ${JSON.stringify(value)}.`, param);
  }
  return text;
}

/**
 * start, end and group_by from a parsed query string (other keys are ignored; an empty value is
 * the same as none). Throws InvalidRequest naming the offending parameter.
 */
export function parseUsageParams(query: unknown): ReportRange {
  const source = (query ?? {}) as Record<string, unknown>;
  const single = (param: string): string | undefined => {
    const value = source[param];
    if (value === undefined) return undefined;
    if (typeof value !== "string") throw new InvalidRequest(`Invalid '${param}': give it at most once.`, param);
    return value.trim() === "" ? undefined : value;
  };
  const startText = single("start");
  const endText = single("end");
  const groupText = single("group_by");
  const params: ReportRange = {};
  if (startText !== undefined) params.start = parseUsageTime(startText, "start");
  if (endText !== undefined) params.end = parseUsageTime(endText, "end");
  if (groupText !== undefined) params.groupBy = parseGroupBy(groupText);
  if (params.start && params.end && params.end.getTime() <= params.start.getTime()) {
    throw new InvalidRequest("Invalid 'end': it must be later than 'start'.", "end");
  }
  return params;
}
