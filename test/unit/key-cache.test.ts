import assert from "node:assert/strict";
import { test } from "node:test";
import { cachedKeyLookup } from "../../src/accounts/key-cache.js";
import { lookUpKey } from "../../src/accounts/principals.js";
import { createKey, revokeKey, setAccountDisabled, setKeyLimits } from "../../src/accounts/key-store.js";
import { forEachDatabase } from "../helpers/databases.js";
import { waitFor } from "../helpers/server.js";
import { loadSettings } from "../../src/config/settings.js";

forEachDatabase("the accepted-key cache", ({ db }) => {
  /** The cache over the real store, counting the lookups that reach the database; the clock is ours to move. */
  const cache = (ttlMs: number) => {
    let lookups = 0;
    let clock = Date.now();
    const authenticate = cachedKeyLookup(
      (token) => {
        lookups++;
        return lookUpKey(db, token);
      },
      { ttlMs, now: () => clock },
    );
    return { authenticate, lookups: () => lookups, advance: (ms: number) => (clock += ms), now: () => clock };
  };

  test("an accepted key is looked up once per period, and not at all with the cache off", async () => {
    const { key } = await createKey(db, { account: "cache-a" });
    const on = cache(1000);
    assert.equal((await on.authenticate(key))?.accountName, "cache-a");
    assert.equal((await on.authenticate(key))?.accountName, "cache-a");
    assert.equal(on.lookups(), 1);
    on.advance(1001);
    await on.authenticate(key);
    assert.equal(on.lookups(), 2);
    const off = cache(0);
    await off.authenticate(key);
    await off.authenticate(key);
    assert.equal(off.lookups(), 2);
  });

  test("a revoked key, a disabled account and new limits take effect at once, within the period", async () => {
    const { key, id } = await createKey(db, { account: "cache-b" });
    const other = await createKey(db, { account: "cache-c" });
    const c = cache(60_000);
    assert.ok(await c.authenticate(key));
    assert.ok(await c.authenticate(other.key));
    await setKeyLimits(db, other.id, { requestsPerMinute: 7 });
    assert.equal((await c.authenticate(other.key))?.limits.requestsPerMinute, 7);
    assert.equal(await revokeKey(db, id), true);
    assert.equal(await c.authenticate(key), null);
    await setAccountDisabled(db, "cache-c", true);
    assert.equal(await c.authenticate(other.key), null);
  });

  test("unknown and refused keys are never remembered: a key refused once is looked up again", async () => {
    const c = cache(60_000);
    const unknown = `sk-sy-${"x".repeat(43)}`;
    assert.equal(await c.authenticate(unknown), null);
    assert.equal(await c.authenticate(unknown), null);
    assert.equal(c.lookups(), 2);
  });

  test("a key's own expiry ends its entry, whatever the period", async () => {
    // Room for a slow machine to create and accept the key before it expires.
    const expiresAt = Date.now() + 3000;
    const { key } = await createKey(db, { account: "cache-d", expiresAt: new Date(expiresAt) });
    const c = cache(60_000);
    assert.ok(await c.authenticate(key));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt + 100 - Date.now())));
    c.advance(expiresAt + 100 - c.now());
    assert.equal(await c.authenticate(key), null);
  });

  test("a change written by another process (no notice to this one) is seen once the period ends", async () => {
    const { key, id } = await createKey(db, { account: "cache-e" });
    const c = cache(1000);
    assert.ok(await c.authenticate(key));
    await db.query("UPDATE api_keys SET revoked_at = now() WHERE id = $1", [id]);
    assert.ok(await c.authenticate(key), "within the period the entry stands");
    c.advance(1001);
    assert.equal(await c.authenticate(key), null);
  });
});

forEachDatabase("the accepted-key cache, in steady use", ({ db }) => {
  test("a key used more often than the period is confirmed in the background and never waits; a revocation seen there ends it", async () => {
    const { key, id } = await createKey(db, { account: "cache-f" });
    let lookups = 0;
    let clock = Date.now();
    let release: (() => void) | undefined;
    const authenticate = cachedKeyLookup(
      async (token) => {
        lookups++;
        if (lookups === 2) await new Promise<void>((resolve) => (release = resolve)); // a slow database, once
        return lookUpKey(db, token);
      },
      { ttlMs: 1000, now: () => clock },
    );
    assert.ok(await authenticate(key));
    clock += 600; // past half the period: answered from the entry, a lookup starts beside it
    assert.equal((await authenticate(key))?.accountName, "cache-f");
    assert.equal(lookups, 2);
    clock += 100;
    assert.ok(await authenticate(key), "one background lookup at a time, and the entry still answers");
    assert.equal(lookups, 2);
    await db.query("UPDATE api_keys SET revoked_at = now() WHERE id = $1", [id]);
    release!();
    // Once the background lookup has found it revoked, the key is refused (well within the period).
    const refused = await waitFor(async () => ((await authenticate(key)) === null ? true : undefined), 30_000);
    assert.equal(refused, true);
    assert.equal(lookups, 3, "the background lookup dropped the entry; the next request looked it up and was refused");
  });
});

test("the period by database: 10 minutes embedded, where every change to a key passes through this server; 1 s on a shared PostgreSQL; the setting overrides both", () => {
  assert.equal(loadSettings({}, {}).keyCacheMs, 600_000);
  assert.equal(loadSettings({}, { SWITCHYARD_DATABASE_URL: "postgres://127.0.0.1/x" }).keyCacheMs, 1_000);
  assert.equal(loadSettings({}, { SWITCHYARD_DATABASE_URL: "postgres://127.0.0.1/x", SWITCHYARD_KEY_CACHE_MS: "0" }).keyCacheMs, 0);
  assert.equal(loadSettings({}, { SWITCHYARD_KEY_CACHE_MS: "2500" }).keyCacheMs, 2_500);
  assert.throws(() => loadSettings({}, { SWITCHYARD_KEY_CACHE_MS: "600001" }));
});
