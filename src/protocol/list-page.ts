import { z } from "zod";
import { InvalidRequest } from "../errors.js";
import { identifier } from "./identifiers.js";

/**
 * OpenAI's cursor pagination, shared by every list route that pages by item id: `after` (the id
 * the page starts after), `limit` (1..100, default 20), `order` (`asc` or `desc`), answered as
 * `{object: "list", data, first_id, last_id, has_more}`.
 */
export const listPageQuery = (defaultOrder: "asc" | "desc") =>
  z.object({
    after: identifier(200).optional(),
    limit: z.coerce.number().int().min(1).max(100).default(20),
    order: z.enum(["asc", "desc"]).default(defaultOrder),
  });

export type ListPageQuery = z.infer<ReturnType<typeof listPageQuery>>;

/** A list answered whole, with no cursor (the models, an account's keys, deployments and adapters). */
export interface WholeList<T> {
  object: "list";
  data: T[];
}

export function listOf<T>(data: T[]): WholeList<T> {
  return { object: "list", data };
}

export interface ListPage<T> extends WholeList<T> {
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/**
 * The page from `limit + 1` items fetched after the cursor (the extra one only says there is more),
 * each kept item put in its wire shape by `toWire` (stored rows to wire objects). Every list
 * envelope is built here.
 */
export function toListPage<T extends { id: string }>(fetched: readonly T[], limit: number): ListPage<T>;
export function toListPage<Row, T extends { id: string }>(fetched: readonly Row[], limit: number, toWire: (row: Row) => T): ListPage<T>;
export function toListPage<T extends { id: string }>(
  fetched: readonly unknown[],
  limit: number,
  toWire: (row: unknown) => T = (row) => row as T,
): ListPage<T> {
  const data = fetched.slice(0, limit).map(toWire);
  return { ...listOf(data), first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: fetched.length > limit };
}

/**
 * A page as JSON text, its items written by `itemText` (items kept as stored text, so the decimals
 * in them stay exact), in the same key order as the page object.
 */
export function listPageText<T extends { id: string }>(page: ListPage<T>, itemText: (item: T) => string): string {
  const { first_id, last_id, has_more } = page;
  const rest = JSON.stringify({ first_id, last_id, has_more }).slice(1);
  return `{"object":"list","data":[${page.data.map(itemText).join(",")}],${rest}`;
}

/**
 * A page of a list held whole (oldest first): in `order`, after the item `after`. An `after` that
 * names no item gives null: the caller answers unknownCursor.
 */
export function pageOf<T extends { id: string }>(items: readonly T[], query: ListPageQuery): ListPage<T> | null {
  const ordered = query.order === "asc" ? items : [...items].reverse();
  const start = query.after === undefined ? 0 : ordered.findIndex((item) => item.id === query.after) + 1;
  if (start === 0 && query.after !== undefined) return null;
  return toListPage(ordered.slice(start, start + query.limit + 1), query.limit);
}

/**
 * The 400 for an `after` that names no item of the list (`what`: "chat completion", "file"), on
 * every list alike: a silently empty page would read as the end of the list.
 */
export function unknownCursor(what: string, after: string): InvalidRequest {
  return new InvalidRequest(
    `No ${what} with id '${after.length > 64 ? `${after.slice(0, 64)}...` : after}' to list after.`,
    "after",
    "invalid_value",
  );
}
