import assert from "node:assert/strict";
import { test } from "node:test";
import { generateApiKey, hashApiKey } from "../../src/accounts/api-key.js";
import { authenticate, countActiveKeys } from "../../src/accounts/principals.js";
import {
  createAccount,
  createKey,
  findOrCreateAccount,
  listKeys,
  revokeKey,
  setAccountDisabled,
  setKeyLimits,
} from "../../src/accounts/key-store.js";
import { InvalidRequest } from "../../src/errors.js";
import { forEachDatabase } from "../helpers/databases.js";

test("generated keys are sk-sy- plus 256 random bits, hashed with SHA-256 over the whole key", () => {
  const generated = generateApiKey();
  assert.match(generated.key, /^sk-sy-[A-Za-z0-9_-]{43}$/);
  assert.ok(generated.key.startsWith(generated.prefix));
  assert.ok(generated.prefix.length < generated.key.length / 2);
  assert.match(generated.secretHash, /^[0-9a-f]{64}$/);
  assert.equal(generated.secretHash, hashApiKey(generated.key));
  assert.notEqual(generateApiKey().key, generated.key);
});

forEachDatabase("accounts and keys", ({ db, kind }) => {
  test("a created key authenticates as its account", async () => {
    const created = await createKey(db, { account: "acme", name: "ci" });
    assert.match(created.id, /^key_/);
    assert.equal(created.account, "acme");
    assert.equal(created.name, "ci");
    const principal = await authenticate(db, created.key);
    assert.ok(principal);
    assert.equal(principal.accountName, "acme");
    assert.equal(principal.keyId, created.id);
    assert.equal(principal.allowedModels, null);
    assert.match(principal.accountId, /^acct_/);
  });

  test("the row holds the hash and prefix, never the key", async () => {
    const created = await createKey(db, { account: "hash-check" });
    const rows = await db.query<Record<string, unknown>>("SELECT * FROM api_keys WHERE id = $1", [created.id]);
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.equal(row.secret_hash, hashApiKey(created.key));
    assert.equal(row.prefix, created.prefix);
    for (const value of Object.values(row)) assert.ok(!String(value).includes(created.key), "the plaintext key must not be stored");
  });

  test("unknown, malformed and empty tokens are rejected", async () => {
    assert.equal(await authenticate(db, generateApiKey().key), null);
    assert.equal(await authenticate(db, "not-a-key"), null);
    assert.equal(await authenticate(db, ""), null);
    const created = await createKey(db, { account: "acme" });
    assert.equal(await authenticate(db, `${created.key}x`), null);
    assert.equal(await authenticate(db, created.key.slice(0, -1)), null);
  });

  test("a revoked key stops working; revoking twice is fine; unknown ids report false", async () => {
    const created = await createKey(db, { account: "revokers" });
    assert.ok(await authenticate(db, created.key));
    assert.equal(await revokeKey(db, created.id), true);
    assert.equal(await authenticate(db, created.key), null);
    const [first] = await listKeys(db, { account: "revokers" });
    assert.equal(await revokeKey(db, created.id), true);
    const [second] = await listKeys(db, { account: "revokers" });
    assert.ok(first?.revokedAt);
    assert.deepEqual(second?.revokedAt, first.revokedAt, "a second revoke keeps the first revocation time");
    assert.equal(await revokeKey(db, "key_doesnotexist"), false);
  });

  test("an expired key stops working", async () => {
    const expired = await createKey(db, { account: "expiry", expiresAt: new Date(Date.now() - 1000) });
    assert.equal(await authenticate(db, expired.key), null);
    const future = await createKey(db, { account: "expiry", expiresAt: new Date(Date.now() + 3_600_000) });
    assert.ok(await authenticate(db, future.key));
    await db.query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", [future.id]);
    assert.equal(await authenticate(db, future.key), null);
  });

  test("disabling an account disables its keys; enabling restores them", async () => {
    const created = await createKey(db, { account: "suspended" });
    const disabled = await setAccountDisabled(db, "suspended", true);
    assert.equal(disabled?.disabled, true);
    assert.equal(await authenticate(db, created.key), null);
    await setAccountDisabled(db, "suspended", false);
    assert.ok(await authenticate(db, created.key));
    assert.equal(await setAccountDisabled(db, "nobody-by-this-name", true), null);
  });

  test("allowed models are stored, cleaned, and returned with the principal", async () => {
    const created = await createKey(db, { account: "limited", allowedModels: [" llama-3 ", "qwen", "qwen"] });
    assert.deepEqual(created.allowedModels, ["llama-3", "qwen"]);
    assert.deepEqual((await authenticate(db, created.key))?.allowedModels, ["llama-3", "qwen"]);
    await assert.rejects(createKey(db, { account: "limited", allowedModels: [" "] }), InvalidRequest);
  });

  test("listKeys filters by account and carries no secrets", async () => {
    const one = await createKey(db, { account: "lister-a", name: "first" });
    await createKey(db, { account: "lister-b" });
    const listed = await listKeys(db, { account: "lister-a" });
    assert.deepEqual(
      listed.map((key) => key.id),
      [one.id],
    );
    const info = listed[0]!;
    assert.deepEqual(Object.keys(info).sort(), [
      "account",
      "allowedModels",
      "budgetUsd",
      "createdAt",
      "expiresAt",
      "id",
      "lastUsedAt",
      "manageDeployments",
      "manageKeys",
      "name",
      "prefix",
      "requestsPerMinute",
      "revokedAt",
      "spentUsd",
      "tokensPerMinute",
    ]);
    const everything = JSON.stringify(await listKeys(db));
    assert.ok(!everything.includes(one.key));
    assert.ok(!everything.includes(hashApiKey(one.key)));
    assert.deepEqual(await listKeys(db, { account: "no-such-account" }), []);
  });

  test("keys carry RPM, TPM and budget limits: set at creation, seen at authentication, changed later", async () => {
    const plain = await createKey(db, { account: "limits-plain" });
    assert.deepEqual([plain.requestsPerMinute, plain.tokensPerMinute, plain.budgetUsd, plain.spentUsd], [null, null, null, "0"]);
    assert.deepEqual((await authenticate(db, plain.key))?.limits, { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: null });

    const limited = await createKey(db, { account: "limits", requestsPerMinute: 60, tokensPerMinute: 90_000, budgetUsd: "25.50" });
    assert.deepEqual([limited.requestsPerMinute, limited.tokensPerMinute, limited.budgetUsd, limited.spentUsd], [60, 90_000, "25.5", "0"]);
    assert.deepEqual((await authenticate(db, limited.key))?.limits, { requestsPerMinute: 60, tokensPerMinute: 90_000, budgetUsd: "25.5" });
    const [listed] = await listKeys(db, { account: "limits" });
    assert.equal(listed?.budgetUsd, "25.5");

    // A value sets, null clears, undefined keeps.
    const changed = await setKeyLimits(db, limited.id, { requestsPerMinute: null, budgetUsd: "0.000000001" });
    assert.deepEqual(
      [changed?.requestsPerMinute, changed?.tokensPerMinute, changed?.budgetUsd, changed?.account],
      [null, 90_000, "0.000000001", "limits"],
    );
    assert.deepEqual((await authenticate(db, limited.key))?.limits, {
      requestsPerMinute: null,
      tokensPerMinute: 90_000,
      budgetUsd: "0.000000001",
    });
    assert.deepEqual(await setKeyLimits(db, limited.id, {}), changed);
    assert.equal(await setKeyLimits(db, "key_nope", { requestsPerMinute: 5 }), null);
    assert.equal(await setKeyLimits(db, "key_nope", {}), null);

    for (const bad of [{ requestsPerMinute: 0 }, { tokensPerMinute: -5 }, { requestsPerMinute: 1.5 }, { tokensPerMinute: 2 ** 31 }]) {
      await assert.rejects(createKey(db, { account: "limits", ...bad }), InvalidRequest);
      await assert.rejects(setKeyLimits(db, limited.id, bad), InvalidRequest);
    }
    for (const budgetUsd of ["-1", "1e3", "abc", "", "1.", ".5", "NaN"]) {
      await assert.rejects(
        createKey(db, { account: "limits", budgetUsd }),
        (error: unknown) => error instanceof InvalidRequest && error.param === "budget_usd",
      );
    }
  });

  test("last_used_at is set on use, and written at most once a minute", async () => {
    const created = await createKey(db, { account: "usage" });
    assert.equal((await listKeys(db, { account: "usage" }))[0]?.lastUsedAt, null);
    await authenticate(db, created.key);
    const first = (await listKeys(db, { account: "usage" }))[0]?.lastUsedAt;
    assert.ok(first instanceof Date);
    await authenticate(db, created.key);
    assert.deepEqual((await listKeys(db, { account: "usage" }))[0]?.lastUsedAt, first);
    await db.query("UPDATE api_keys SET last_used_at = now() - interval '2 minutes' WHERE id = $1", [created.id]);
    await authenticate(db, created.key);
    const refreshed = (await listKeys(db, { account: "usage" }))[0]?.lastUsedAt;
    assert.ok(refreshed && refreshed.getTime() > first.getTime() - 1000);
  });

  test("countActiveKeys counts only keys that would authenticate", async () => {
    const before = await countActiveKeys(db);
    const live = await createKey(db, { account: "counted" });
    await createKey(db, { account: "counted", expiresAt: new Date(Date.now() - 1000) });
    const revoked = await createKey(db, { account: "counted" });
    await revokeKey(db, revoked.id);
    assert.equal(await countActiveKeys(db), before + 1);
    await setAccountDisabled(db, "counted", true);
    assert.equal(await countActiveKeys(db), before);
    assert.ok(live);
  });

  test("accounts: create refuses duplicates, findOrCreate is idempotent, names are validated", async () => {
    const created = await createAccount(db, "unique-co");
    await assert.rejects(
      createAccount(db, "unique-co"),
      (error: unknown) => error instanceof InvalidRequest && error.code === "account_exists",
    );
    assert.equal((await findOrCreateAccount(db, "unique-co")).id, created.id);
    const [a, b] = await Promise.all([findOrCreateAccount(db, "raced-co"), findOrCreateAccount(db, "raced-co")]);
    assert.equal(a.id, b.id);
    await assert.rejects(createAccount(db, "has space"), InvalidRequest);
    await assert.rejects(createAccount(db, ""), InvalidRequest);
  });

  test("concurrent creates and authentications all succeed", async () => {
    const created = await Promise.all(Array.from({ length: 10 }, (_, index) => createKey(db, { account: `burst-${index % 3}` })));
    const principals = await Promise.all(created.map((key) => authenticate(db, key.key)));
    assert.deepEqual(
      principals.map((principal) => principal?.keyId),
      created.map((key) => key.id),
    );
  });

  if (kind === "pglite") {
    test("concurrent transactions on PGlite never interleave (no lost updates)", async () => {
      await db.query("CREATE TABLE counter (n int NOT NULL)");
      await db.query("INSERT INTO counter VALUES (0)");
      // Read, yield to the event loop, write back: interleaving would lose increments.
      const increment = () =>
        db.transaction(async (tx) => {
          const [row] = await tx.query<{ n: number }>("SELECT n FROM counter");
          await new Promise((resolve) => setTimeout(resolve, 5));
          await tx.query("UPDATE counter SET n = $1", [row!.n + 1]);
        });
      await Promise.all(Array.from({ length: 10 }, increment));
      assert.deepEqual(await db.query("SELECT n FROM counter"), [{ n: 10 }]);
    });
  }
});
