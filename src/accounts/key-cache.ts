import { hashApiKey } from "./api-key.js";

/**
 * Keys this process accepted in the last moment, so a busy key is not looked up on every request.
 *
 * The lookup was the largest single statement per request on embedded PGlite (0.87 ms of main
 * thread for a two-table join, measured at 130 requests/s), and a round trip to PostgreSQL.
 *
 * What stays exact: a change made through this process (a key revoked or re-limited, an account
 * disabled: the store calls `keysChanged`) drops every entry at once; a key's own expiry ends its
 * entry at that instant. What a cache can not see is a change written by another process on a
 * shared PostgreSQL: that takes effect here within `ttlMs` (SWITCHYARD_KEY_CACHE_MS, 1 s by
 * default; 0 turns the cache off). Budgets are read again under the key's row lock at reservation,
 * so spend limits never rest on a cached value.
 *
 * Only keys that were accepted are remembered, by the SHA-256 of the secret (never the secret); an
 * unknown or refused key is looked up every time, so a new key works at once.
 */
export interface CachedKey<P> {
  principal: P;
  /** When the key itself expires (ms since the epoch), or null. */
  expiresAt: number | null;
}

let generation = 0;

/** Every write that narrows what a key may do calls this: every cache in the process forgets every key. */
export function keysChanged(): void {
  generation++;
}

export interface KeyCacheOptions {
  ttlMs: number;
  /** Entries at most; past it the cache starts again empty (default 10,000). */
  maxEntries?: number;
  now?: () => number;
}

export function cachedKeyLookup<P>(lookup: (token: string) => Promise<CachedKey<P> | null>, options: KeyCacheOptions): (token: string) => Promise<P | null> {
  const { ttlMs, maxEntries = 10_000, now = Date.now } = options;
  const entries = new Map<string, { principal: P; until: number; generation: number }>();
  return async (token) => {
    if (ttlMs <= 0) return (await lookup(token))?.principal ?? null;
    const id = hashApiKey(token);
    const entry = entries.get(id);
    if (entry && entry.generation === generation && now() < entry.until) return entry.principal;
    const seenAt = generation;
    const found = await lookup(token);
    if (!found) {
      entries.delete(id);
      return null;
    }
    if (entries.size >= maxEntries) entries.clear();
    // The generation from before the lookup: a change that lands while it runs is not papered over.
    entries.set(id, { principal: found.principal, until: Math.min(now() + ttlMs, found.expiresAt ?? Infinity), generation: seenAt });
    return found.principal;
  };
}
