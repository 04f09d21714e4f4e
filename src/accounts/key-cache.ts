import { hashApiKey } from "./api-key.js";

/**
 * Keys this process accepted in the last moment, so a busy key is not looked up on every request,
 * and a key in steady use never waits for a lookup (it is confirmed again in the background).
 *
 * The lookup was the largest single statement per request on embedded PGlite (0.87 ms of main
 * thread for a two-table join, measured at 130 requests/s), and a round trip to PostgreSQL.
 *
 * What stays exact: a change made through this process (a key revoked or re-limited, an account
 * disabled: the store calls `keysChanged`) drops every entry at once; a key's own expiry ends its
 * entry at that instant. What a cache can not see is a change written by another process on a
 * shared PostgreSQL: that takes effect here within `ttlMs` (SWITCHYARD_KEY_CACHE_MS: 1 s by
 * default there, 10 minutes on the embedded database, which no other process writes; 0 turns the
 * cache off). Budgets are read again under the key's row lock at reservation,
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

export function cachedKeyLookup<P>(
  lookup: (token: string) => Promise<CachedKey<P> | null>,
  options: KeyCacheOptions,
): (token: string) => Promise<P | null> {
  const { ttlMs, maxEntries = 10_000, now = Date.now } = options;
  const entries = new Map<string, Entry<P>>();
  /** Looks the key up and remembers the answer; the generation from before the lookup, so a change that lands while it runs is not papered over. */
  const refresh = async (token: string, id: string): Promise<P | null> => {
    const seenAt = generation;
    const found = await lookup(token);
    if (!found) {
      entries.delete(id);
      return null;
    }
    if (entries.size >= maxEntries && !entries.has(id)) entries.clear();
    entries.set(id, {
      principal: found.principal,
      confirmedAt: now(),
      expiresAt: found.expiresAt ?? Infinity,
      generation: seenAt,
      refreshing: false,
    });
    return found.principal;
  };
  return async (token) => {
    if (ttlMs <= 0) return (await lookup(token))?.principal ?? null;
    const id = hashApiKey(token);
    const entry = entries.get(id);
    const at = now();
    if (!entry || entry.generation !== generation || at >= entry.expiresAt || at - entry.confirmedAt >= ttlMs) return refresh(token, id);
    // Past half its period, a busy key is confirmed again in the background: it never waits for
    // the lookup, and no answer is older than the period.
    if (at - entry.confirmedAt >= ttlMs / 2 && !entry.refreshing) {
      entry.refreshing = true;
      refresh(token, id).catch(() => entries.delete(id));
    }
    return entry.principal;
  };
}

interface Entry<P> {
  principal: P;
  /** When the database last accepted the key (ms, `now`). */
  confirmedAt: number;
  expiresAt: number;
  generation: number;
  refreshing: boolean;
}
