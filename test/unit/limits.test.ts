import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, describe, test } from "node:test";
import { Redis } from "ioredis";
import { RateLimited, ServiceError } from "../../src/errors.js";
import { limitDefaultsFromEnv, type LimitDefaults } from "../../src/limits/defaults.js";
import { createMemoryLimits } from "../../src/limits/in-memory-limits.js";
import { openRequestLimits } from "../../src/limits/open.js";
import { retryAfterMs, WINDOW_MS } from "../../src/limits/limit-policy.js";
import { createRedisLimits } from "../../src/limits/redis.js";
import type { KeyLimits } from "../../src/protocol/principal.js";
import type { LimitLease, RequestLimits } from "../../src/limits/ports.js";

const REDIS_URL = process.env.SWITCHYARD_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
/** Every Redis key this run writes starts with this, and is deleted at the end. */
const PREFIX = `switchyard-test:${randomBytes(6).toString("hex")}:`;

const NO_LIMITS: KeyLimits = { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: null };
const DEFAULTS: LimitDefaults = { concurrentPerAccountModel: 200, requestsPerMinute: null, tokensPerMinute: null };

const unique = (kind: string) => `${kind}_${randomBytes(6).toString("base64url")}`;

/** Runs fn and returns the RateLimited it must throw. */
async function refused(promise: Promise<unknown>): Promise<RateLimited> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof RateLimited, `expected RateLimited, got ${String(error)}`);
    assert.equal(error.status, 429);
    assert.equal(error.code, "rate_limit_exceeded");
    return error;
  }
  assert.fail("expected a 429");
}

function retryAfter(error: RateLimited): number {
  const header = error.headers["retry-after"];
  assert.ok(header !== undefined, "a 429 carries Retry-After");
  assert.match(header, /^\d+$/);
  return Number(header);
}

interface Backend {
  name: "memory" | "redis";
  /** A limiter with these defaults; several calls give independent instances (separate connections for Redis). */
  open(defaults?: Partial<LimitDefaults>): RequestLimits;
}

const redisClients: Array<{ close(): Promise<void> }> = [];
after(async () => {
  await Promise.all(redisClients.map((client) => client.close()));
  const cleaner = new Redis(REDIS_URL);
  try {
    const keys = await cleaner.keys(`${PREFIX}*`);
    if (keys.length > 0) await cleaner.del(...keys);
  } finally {
    cleaner.disconnect();
  }
});

const backends: Backend[] = [
  { name: "memory", open: (defaults) => createMemoryLimits({ ...DEFAULTS, ...defaults }) },
  {
    name: "redis",
    open(defaults) {
      const limits = createRedisLimits(REDIS_URL, { ...DEFAULTS, ...defaults }, { keyPrefix: PREFIX });
      redisClients.push(limits);
      return limits;
    },
  },
];

for (const backend of backends) {
  describe(`request limits [${backend.name}]`, () => {
    test("concurrency is capped per (account, model) and freed by release", async () => {
      const limits = backend.open({ concurrentPerAccountModel: 3 });
      const account = unique("acct");
      const request = (model = "qwen", accountId = account) => ({
        accountId,
        keyId: unique("key"),
        model,
        estimatedTokens: 10,
        limits: NO_LIMITS,
      });

      const leases = await Promise.all([limits.admit(request()), limits.admit(request()), limits.admit(request())]);
      const error = await refused(limits.admit(request()));
      assert.equal(retryAfter(error), 1);
      assert.match(error.message, /concurrent requests for model 'qwen'/);

      // Another model, or another account, has its own slots.
      const otherModel = await limits.admit(request("llama"));
      const otherAccount = await limits.admit(request("qwen", unique("acct")));

      await leases[0]!.release(10);
      await leases[0]!.release(10); // a second release frees nothing more
      const again = await limits.admit(request());
      await refused(limits.admit(request()));

      for (const lease of [...leases.slice(1), again, otherModel, otherAccount]) await lease.release(0);
      const fresh = await Promise.all([limits.admit(request()), limits.admit(request()), limits.admit(request())]);
      await Promise.all(fresh.map((lease) => lease.release(0)));
    });

    test("requests per minute: the key's own limit, with a Retry-After within the minute", async () => {
      const limits = backend.open();
      const keyId = unique("key");
      const request = {
        accountId: unique("acct"),
        keyId,
        model: "qwen",
        estimatedTokens: 5,
        limits: { ...NO_LIMITS, requestsPerMinute: 3 },
      };
      for (let i = 0; i < 3; i++) await (await limits.admit(request)).release(5);
      const error = await refused(limits.admit(request));
      const seconds = retryAfter(error);
      assert.ok(seconds > 0 && seconds <= 60, `Retry-After ${seconds}`);
      assert.match(error.message, /requests per minute \(RPM\).*Limit 3, Used 3, Requested 1/);
      // Refusals are not counted, and other keys are not affected.
      await refused(limits.admit(request));
      await (await limits.admit({ ...request, keyId: unique("key") })).release(0);
    });

    test("rate-limit state: after each admission, on a refusal, and read without taking, as the x-ratelimit headers", async () => {
      const limits = backend.open();
      const request = {
        accountId: unique("acct"),
        keyId: unique("key"),
        model: "qwen",
        estimatedTokens: 100,
        limits: { ...NO_LIMITS, requestsPerMinute: 2, tokensPerMinute: 1000 },
      };
      assert.deepEqual(await limits.peek!(request), {
        requests: { limit: 2, remaining: 2, resetMs: 0 },
        tokens: { limit: 1000, remaining: 1000, resetMs: 0 },
      });
      const first = await limits.admit(request);
      assert.equal(first.state?.requests?.remaining, 1);
      assert.equal(first.state?.tokens?.remaining, 900, "the estimate counts until released");
      const reset = first.state!.requests!.resetMs;
      assert.ok(reset > 59_000 && reset <= 60_000, `a request taken now ages out in a minute: ${reset}`);
      await first.release(40);
      const second = await limits.admit(request);
      assert.deepEqual([second.state?.requests?.remaining, second.state?.tokens?.remaining], [0, 860]);
      const error = await refused(limits.admit(request));
      assert.equal(error.headers["x-ratelimit-limit-requests"], "2");
      assert.equal(error.headers["x-ratelimit-remaining-requests"], "0");
      assert.match(error.headers["x-ratelimit-reset-requests"]!, /^(\d+s|1m0s)$/);
      assert.equal(error.headers["x-ratelimit-remaining-tokens"], "860");
      const peeked = await limits.peek!(request);
      assert.deepEqual([peeked.requests?.remaining, peeked.tokens?.remaining], [0, 860], "reading takes nothing");
      assert.deepEqual(await limits.peek!({ ...request, limits: NO_LIMITS }), {}, "a key without limits has no windows to report");
      await second.release(100);
    });

    test("requests per minute: the server default applies to keys without their own", async () => {
      const limits = backend.open({ requestsPerMinute: 2 });
      const base = { accountId: unique("acct"), model: "qwen", estimatedTokens: 1 };
      const defaulted = { ...base, keyId: unique("key"), limits: NO_LIMITS };
      await (await limits.admit(defaulted)).release(1);
      await (await limits.admit(defaulted)).release(1);
      await refused(limits.admit(defaulted));

      const ownLimit = { ...base, keyId: unique("key"), limits: { ...NO_LIMITS, requestsPerMinute: 4 } };
      for (let i = 0; i < 4; i++) await (await limits.admit(ownLimit)).release(1);
      await refused(limits.admit(ownLimit));
    });

    test("tokens per minute: the estimate is checked at admission, the actual usage replaces it on release", async () => {
      const limits = backend.open();
      const keyId = unique("key");
      const request = (estimatedTokens: number) => ({
        accountId: unique("acct"),
        keyId,
        model: "qwen",
        estimatedTokens,
        limits: { ...NO_LIMITS, tokensPerMinute: 1000 },
      });

      const big = await limits.admit(request(800));
      const error = await refused(limits.admit(request(300)));
      const seconds = retryAfter(error);
      assert.ok(seconds > 0 && seconds <= 60, `Retry-After ${seconds}`);
      assert.match(error.message, /tokens per minute \(TPM\).*Limit 1000, Used 800, Requested 300/);

      await big.release(100); // used 100 of the 800 it might have
      const second = await limits.admit(request(300)); // 100 + 300
      await refused(limits.admit(request(700))); // 100 + 300 + 700 > 1000
      const third = await limits.admit(request(600)); // exactly 1000
      await refused(limits.admit(request(1)));
      await second.release(0);
      await third.release(0);
      await (await limits.admit(request(900))).release(900); // 100 + 900
      await refused(limits.admit(request(1)));
    });

    test("a request larger than the whole TPM limit is a 429 request_too_large with no Retry-After (no wait lets it pass) and x-should-retry: false", async () => {
      const limits = backend.open({ tokensPerMinute: 50 });
      await assert.rejects(
        limits.admit({ accountId: unique("acct"), keyId: unique("key"), model: "qwen", estimatedTokens: 51, limits: NO_LIMITS }),
        (error: unknown) => {
          assert.ok(error instanceof ServiceError, String(error));
          assert.equal(error.status, 429);
          assert.equal(error.code, "request_too_large");
          assert.equal(error.headers["retry-after"], undefined);
          assert.equal(error.headers["x-should-retry"], "false");
          assert.match(error.message, /Request too large for tokens per minute \(TPM\).*Limit 50, Requested 51\. It can never fit/);
          return true;
        },
      );
    });

    test("a refused request takes nothing: no slot, no request, no tokens", async () => {
      const limits = backend.open({ concurrentPerAccountModel: 1 });
      const accountId = unique("acct");
      const keyId = unique("key");
      const keyLimits = { ...NO_LIMITS, requestsPerMinute: 2, tokensPerMinute: 100 };
      const holder = await limits.admit({ accountId, keyId, model: "qwen", estimatedTokens: 10, limits: keyLimits });
      // Refused on concurrency: neither the request nor its tokens count.
      await refused(limits.admit({ accountId, keyId, model: "qwen", estimatedTokens: 90, limits: keyLimits }));
      await holder.release(10);
      const second = await limits.admit({ accountId, keyId, model: "qwen", estimatedTokens: 90, limits: keyLimits });
      await second.release(90);
      // RPM is now spent; refusing on it must not take the (free) slot.
      await refused(limits.admit({ accountId, keyId, model: "qwen", estimatedTokens: 0, limits: keyLimits }));
      await (await limits.admit({ accountId, keyId: unique("key"), model: "qwen", estimatedTokens: 0, limits: NO_LIMITS })).release(0);
    });

    test("bad token counts: admission rejects them, release falls back to the estimate", async () => {
      const limits = backend.open();
      const keyId = unique("key");
      const request = (estimatedTokens: number) => ({
        accountId: unique("acct"),
        keyId,
        model: "qwen",
        estimatedTokens,
        limits: { ...NO_LIMITS, tokensPerMinute: 100 },
      });
      await assert.rejects(limits.admit(request(-1)), TypeError);
      await assert.rejects(limits.admit(request(1.5)), TypeError);
      await (await limits.admit(request(60))).release(Number.NaN); // charged as 60
      await refused(limits.admit(request(41)));
      await (await limits.admit(request(40))).release(40);
    });
  });
}

describe("request limits [redis]: shared by several server processes", () => {
  test("two limiters on two connections share one concurrency cap exactly", async () => {
    const a = createRedisLimits(REDIS_URL, { ...DEFAULTS, concurrentPerAccountModel: 5 }, { keyPrefix: PREFIX });
    const b = createRedisLimits(REDIS_URL, { ...DEFAULTS, concurrentPerAccountModel: 5 }, { keyPrefix: PREFIX });
    redisClients.push(a, b);
    const accountId = unique("acct");
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 ? b : a).admit({ accountId, keyId: unique("key"), model: "qwen", estimatedTokens: 1, limits: NO_LIMITS }),
      ),
    );
    const admitted = outcomes.filter((o): o is PromiseFulfilledResult<LimitLease> => o.status === "fulfilled");
    const rejected = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
    assert.equal(admitted.length, 5);
    assert.equal(rejected.length, 15);
    for (const r of rejected) assert.ok(r.reason instanceof RateLimited);

    // A slot taken through one process can be released through the limiter that took it, and used from the other.
    await admitted[0]!.value.release(1);
    const next = await b.admit({ accountId, keyId: unique("key"), model: "qwen", estimatedTokens: 1, limits: NO_LIMITS });
    await refused(a.admit({ accountId, keyId: unique("key"), model: "qwen", estimatedTokens: 1, limits: NO_LIMITS }));
    await Promise.all([next, ...admitted.slice(1).map((o) => o.value)].map((lease) => lease.release(1)));
  });

  test("the rate-limit state is the same through either process", async () => {
    const a = createRedisLimits(REDIS_URL, DEFAULTS, { keyPrefix: PREFIX });
    const b = createRedisLimits(REDIS_URL, DEFAULTS, { keyPrefix: PREFIX });
    redisClients.push(a, b);
    const request = {
      accountId: unique("acct"),
      keyId: unique("key"),
      model: "qwen",
      estimatedTokens: 10,
      limits: { ...NO_LIMITS, requestsPerMinute: 5, tokensPerMinute: 100 },
    };
    const leases = [await a.admit(request), await b.admit(request), await a.admit(request)];
    assert.deepEqual(
      leases.map((l) => l.state?.requests?.remaining),
      [4, 3, 2],
      "each admission sees the others'",
    );
    assert.deepEqual(
      leases.map((l) => l.state?.tokens?.remaining),
      [90, 80, 70],
    );
    const [fromA, fromB] = [await a.peek!(request), await b.peek!(request)];
    assert.deepEqual([fromA.requests?.remaining, fromA.tokens?.remaining], [2, 70]);
    assert.deepEqual([fromB.requests?.remaining, fromB.tokens?.remaining], [2, 70]);
    await Promise.all(leases.map((l) => l.release(10)));
  });

  test("two limiters share one RPM and TPM window", async () => {
    const a = createRedisLimits(REDIS_URL, DEFAULTS, { keyPrefix: PREFIX });
    const b = createRedisLimits(REDIS_URL, DEFAULTS, { keyPrefix: PREFIX });
    redisClients.push(a, b);
    const keyId = unique("key");
    const rpm = { accountId: unique("acct"), keyId, model: "qwen", estimatedTokens: 0, limits: { ...NO_LIMITS, requestsPerMinute: 4 } };
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => (i % 2 ? b : a).admit(rpm)));
    assert.equal(outcomes.filter((o) => o.status === "fulfilled").length, 4);

    const tpmKey = unique("key");
    const tpm = (estimatedTokens: number) => ({
      accountId: unique("acct"),
      keyId: tpmKey,
      model: "qwen",
      estimatedTokens,
      limits: { ...NO_LIMITS, tokensPerMinute: 100 },
    });
    const lease = await a.admit(tpm(70));
    await refused(b.admit(tpm(31)));
    await lease.release(20);
    await (await b.admit(tpm(80))).release(80);
    await refused(a.admit(tpm(1)));
  });

  test("a crashed process's concurrency leases expire, and every key has a TTL", async () => {
    const limits = createRedisLimits(REDIS_URL, { ...DEFAULTS, concurrentPerAccountModel: 1 }, { keyPrefix: PREFIX });
    redisClients.push(limits);
    const inspector = new Redis(REDIS_URL);
    try {
      const accountId = unique("acct");
      const slots = `${PREFIX}conc:${accountId}:qwen`;
      // A lease left behind by a process that died: its expiry has passed.
      await inspector.zadd(slots, Date.now() - 1000, "dead-process-lease");
      const keyId = unique("key");
      const lease = await limits.admit({
        accountId,
        keyId,
        model: "qwen",
        estimatedTokens: 5,
        limits: { ...NO_LIMITS, requestsPerMinute: 10, tokensPerMinute: 10 },
      });
      assert.ok(!(await inspector.zrange(slots, "0", "-1")).includes("dead-process-lease"), "the dead lease was dropped");
      const [member, score] = await inspector.zrange(slots, "0", "-1", "WITHSCORES");
      assert.ok(member);
      const expiresIn = Number(score) - Date.now();
      assert.ok(expiresIn > 9 * 60_000 && expiresIn <= 10 * 60_000 + 5_000, `lease expires in ${expiresIn} ms`);
      for (const key of [slots, `${PREFIX}rpm:${keyId}`, `${PREFIX}tpm:${keyId}`]) {
        const ttl = await inspector.pttl(key);
        assert.ok(ttl > 0, `${key} has a TTL (${ttl})`);
      }
      await lease.release(5);
      assert.equal(await inspector.zcard(slots), 0);
    } finally {
      inspector.disconnect();
    }
  });
});

describe("request limits [memory]: the window slides", () => {
  test("requests count for a minute from the second they were admitted", async () => {
    let now = Date.UTC(2025, 0, 1, 12, 0, 0, 250);
    const limits = createMemoryLimits({ ...DEFAULTS, requestsPerMinute: 2 }, { now: () => now });
    const request = { accountId: "acct_a", keyId: "key_a", model: "qwen", estimatedTokens: 0, limits: NO_LIMITS };
    await (await limits.admit(request)).release(0); // second 0
    now += 30_000;
    await (await limits.admit(request)).release(0); // second 30
    now += 10_000;
    const error = await refused(limits.admit(request));
    assert.equal(retryAfter(error), 20); // the first request leaves the window at second 60
    now += 19_000;
    await refused(limits.admit(request));
    now += 1_000; // 12:01:00.250: second 0 is out
    await (await limits.admit(request)).release(0);
    await refused(limits.admit(request));
  });

  test("tokens charged at release count from the release", async () => {
    let now = Date.UTC(2025, 0, 1, 12, 0, 0, 0);
    const limits = createMemoryLimits({ ...DEFAULTS, tokensPerMinute: 100 }, { now: () => now });
    const request = (estimatedTokens: number) => ({
      accountId: "acct_a",
      keyId: "key_t",
      model: "qwen",
      estimatedTokens,
      limits: NO_LIMITS,
    });
    const lease = await limits.admit(request(100));
    now += 50_000;
    await lease.release(80); // estimate leaves second 0, 80 tokens go into second 50
    now += 15_000; // second 65: second 0 would have aged out, second 50 has not
    await refused(limits.admit(request(21)));
    await (await limits.admit(request(20))).release(20);
  });
});

test("retryAfterMs: the time until enough of the oldest buckets have left the window", () => {
  const now = 1_000_000_500; // bucket 1_000_000, half a second in
  const buckets: Array<[number, number]> = [
    [1_000_000 - 59, 2], // oldest live bucket: leaves the window in 0.5 s
    [1_000_000 - 30, 3],
    [1_000_000, 5],
  ];
  assert.equal(retryAfterMs(buckets, 10, 1, now), 500); // 10 used, 1 needed: the oldest 2 suffice
  assert.equal(retryAfterMs(buckets, 10, 3, now), 29_500); // needs the second bucket gone too
  assert.equal(retryAfterMs(buckets, 10, 8, now), 59_500);
  assert.equal(retryAfterMs(buckets, 20, 8, now), 0); // fits now
  assert.equal(retryAfterMs(buckets, 10, 11, now), WINDOW_MS); // never fits
  assert.equal(retryAfterMs([[1_000_000 - 60, 100]], 10, 1, now), 0); // already out of the window
});

test("limit defaults come from the environment", () => {
  assert.deepEqual(limitDefaultsFromEnv({}), { concurrentPerAccountModel: 200, requestsPerMinute: null, tokensPerMinute: null });
  assert.deepEqual(
    limitDefaultsFromEnv({ SWITCHYARD_MAX_CONCURRENT_PER_MODEL: "3", SWITCHYARD_DEFAULT_RPM: "60", SWITCHYARD_DEFAULT_TPM: " 90000 " }),
    { concurrentPerAccountModel: 3, requestsPerMinute: 60, tokensPerMinute: 90000 },
  );
  assert.deepEqual(limitDefaultsFromEnv({ SWITCHYARD_DEFAULT_RPM: "" }).requestsPerMinute, null);
  for (const bad of ["0", "-1", "1.5", "ten", "1e3"]) {
    assert.throws(() => limitDefaultsFromEnv({ SWITCHYARD_DEFAULT_RPM: bad }), /SWITCHYARD_DEFAULT_RPM must be a positive integer/);
  }
});

describe("openRequestLimits (from the given environment)", () => {
  test("memory without SWITCHYARD_REDIS_URL, Redis with it", async () => {
    const memory = await openRequestLimits({ SWITCHYARD_MAX_CONCURRENT_PER_MODEL: "1" });
    assert.equal(memory.kind, "memory");
    const lease = await memory.admit({ accountId: "a", keyId: "k", model: "m", estimatedTokens: 0, limits: NO_LIMITS });
    await refused(memory.admit({ accountId: "a", keyId: "k", model: "m", estimatedTokens: 0, limits: NO_LIMITS }));
    await lease.release(0);
    await memory.close();

    const redis = await openRequestLimits({ SWITCHYARD_REDIS_URL: REDIS_URL });
    assert.equal(redis.kind, "redis");
    await redis.close();
  });

  test("an unreachable Redis fails at startup", async () => {
    await assert.rejects(
      openRequestLimits({ SWITCHYARD_REDIS_URL: "redis://127.0.0.1:1" }),
      /SWITCHYARD_REDIS_URL is set but Redis at redis:\/\/127\.0\.0\.1:1.* is unreachable/,
    );
  });
});

describe("Redis concurrency leases (issue 11)", () => {
  test("a lease held longer than its TTL is refreshed, so a long stream keeps its slot", async () => {
    const limits = createRedisLimits(REDIS_URL, { ...DEFAULTS, concurrentPerAccountModel: 1 }, { keyPrefix: PREFIX, leaseTtlMs: 600 });
    redisClients.push(limits);
    const request = {
      accountId: `lease-${Date.now()}`,
      keyId: "k",
      model: "m",
      estimatedTokens: 1,
      limits: { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: null },
    };
    const held = await limits.admit(request);
    await new Promise((r) => setTimeout(r, 2000)); // over three TTLs
    await assert.rejects(
      limits.admit(request),
      (error: unknown) => (error as { status?: number }).status === 429,
      "the slot is still taken",
    );
    await held.release(1);
    await (await limits.admit(request)).release(1);
  });
});
