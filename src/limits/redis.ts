import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { LimitLease, RequestLimits } from "./ports.js";
import type { LimitDefaults } from "./defaults.js";
import {
  assertTokenCount,
  BUCKET_MS,
  CONCURRENCY_LEASE_TTL_MS,
  effectiveLimits,
  limitState,
  refusalError,
  releasedTokens,
  WINDOW_BUCKETS,
  type RefusedLimit,
} from "./limit-policy.js";

export interface RedisLimitsOptions {
  /** Prepended to every key; tests use a unique one per run. Default "switchyard:limits:". */
  keyPrefix?: string;
  /** How long a concurrency lease lives unless refreshed; default CONCURRENCY_LEASE_TTL_MS. */
  leaseTtlMs?: number;
}

export interface RedisRequestLimits extends RequestLimits {
  /** Resolves once Redis answers; rejects when it cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/*
 * The same rules as the in-memory limiter (see limit-policy.ts), checked and taken inside Redis by Lua
 * scripts, so every server process sharing the Redis shares the limits exactly. Time is Redis's own
 * clock (TIME), so processes on machines with skewed clocks still agree on the windows.
 *
 * Keys (<p> is the prefix):
 *   <p>rpm:<keyId>                 hash: one-second bucket -> requests taken in it
 *   <p>tpm:<keyId>                 hash: one-second bucket -> tokens charged in it
 *   <p>conc:<accountId>:<model>    sorted set: lease id scored by its expiry (ms); a lease of a
 *                                  process that died ages out after CONCURRENCY_LEASE_TTL_MS
 * Every key carries a TTL, so idle keys disappear on their own. The admit script touches keys of
 * one key id and one account, so on Redis Cluster they would need a shared hash tag; standalone and
 * Sentinel deployments need nothing.
 */

/** Shared by both scripts: Redis time in ms, and the window's current and oldest live bucket. */
const LUA_CLOCK = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local bucket_ms = tonumber(ARGV[1])
local window_buckets = tonumber(ARGV[2])
local bucket = math.floor(now / bucket_ms)
local oldest = bucket - window_buckets + 1
local window_ttl = bucket_ms * (window_buckets + 1)
`;

/**
 * KEYS: rpm hash, tpm hash, concurrency set.
 * ARGV: bucket ms, window buckets, rpm limit (-1: none), tpm limit (-1: none), concurrency limit,
 *       estimated tokens, lease id, lease ttl ms.
 * Returns {0, now, bucket, rpm used, rpm newest, tpm used, tpm newest} when admitted (after taking),
 * else {code, max, used, requested, now, rpm used, rpm newest, tpm used, tpm newest, b1, a1, b2, a2...}
 * with code 1 requests, 2 tokens, 3 concurrency, and the refused window's live buckets. "newest" is
 * a window's newest live bucket (-1: empty); with "used", the rate-limit headers.
 */
const LUA_LOAD = `
-- Sums the live buckets of a window hash, deleting the ones that have left the window.
local function load(key)
  local flat = redis.call('HGETALL', key)
  local total, live, dead, newest = 0, {}, {}, -1
  for i = 1, #flat, 2 do
    local b = tonumber(flat[i])
    if b < oldest then
      dead[#dead + 1] = flat[i]
    else
      local a = tonumber(flat[i + 1])
      total = total + a
      live[#live + 1] = b
      live[#live + 1] = a
      if a > 0 and b > newest then newest = b end
    end
  end
  if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
  return total, live, newest
end
`;

const ADMIT_LUA = `${LUA_CLOCK}${LUA_LOAD}
local rpm = tonumber(ARGV[3])
local tpm = tonumber(ARGV[4])
local concurrent = tonumber(ARGV[5])
local estimate = tonumber(ARGV[6])

local rpm_used, rpm_live, rpm_newest = 0, {}, -1
local tpm_used, tpm_live, tpm_newest = 0, {}, -1
if rpm >= 0 then rpm_used, rpm_live, rpm_newest = load(KEYS[1]) end
if tpm >= 0 then tpm_used, tpm_live, tpm_newest = load(KEYS[2]) end

local function refuse(code, max, used, requested, live)
  local out = {code, max, used, requested, now, rpm_used, rpm_newest, tpm_used, tpm_newest}
  for i = 1, #live do out[#out + 1] = live[i] end
  return out
end

if rpm >= 0 and rpm_used + 1 > rpm then return refuse(1, rpm, rpm_used, 1, rpm_live) end
if tpm >= 0 and tpm_used + estimate > tpm then return refuse(2, tpm, tpm_used, estimate, tpm_live) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local running = redis.call('ZCARD', KEYS[3])
if running >= concurrent then return refuse(3, concurrent, running, 1, {}) end

if rpm >= 0 then
  redis.call('HINCRBY', KEYS[1], bucket, 1)
  redis.call('PEXPIRE', KEYS[1], window_ttl)
  rpm_used, rpm_newest = rpm_used + 1, bucket
end
if tpm >= 0 and estimate > 0 then
  redis.call('HINCRBY', KEYS[2], bucket, ARGV[6])
  redis.call('PEXPIRE', KEYS[2], window_ttl)
  tpm_used, tpm_newest = tpm_used + estimate, bucket
end
local lease_ttl = tonumber(ARGV[8])
redis.call('ZADD', KEYS[3], now + lease_ttl, ARGV[7])
redis.call('PEXPIRE', KEYS[3], lease_ttl)
return {0, now, bucket, rpm_used, rpm_newest, tpm_used, tpm_newest}
`;

/**
 * KEYS: rpm hash, tpm hash. ARGV: bucket ms, window buckets, reads rpm (1/0), reads tpm (1/0).
 * Takes nothing; returns {now, rpm used, rpm newest, tpm used, tpm newest}.
 */
const PEEK_LUA = `${LUA_CLOCK}${LUA_LOAD}
local rpm_used, rpm_live, rpm_newest = 0, {}, -1
local tpm_used, tpm_live, tpm_newest = 0, {}, -1
if ARGV[3] == '1' then rpm_used, rpm_live, rpm_newest = load(KEYS[1]) end
if ARGV[4] == '1' then tpm_used, tpm_live, tpm_newest = load(KEYS[2]) end
return {now, rpm_used, rpm_newest, tpm_used, tpm_newest}
`;

/**
 * KEYS: tpm hash, concurrency set.
 * ARGV: bucket ms, window buckets, lease id, charges tokens (1/0), admitted bucket, estimate, actual.
 * Frees the slot; the estimate leaves the bucket it went into (if still live), the actual usage
 * counts from now. Returns 1 if the lease was still held.
 */
const RELEASE_LUA = `${LUA_CLOCK}
local held = redis.call('ZREM', KEYS[2], ARGV[3])
if ARGV[4] == '1' then
  local admitted = tonumber(ARGV[5])
  local estimate = tonumber(ARGV[6])
  local actual = tonumber(ARGV[7])
  if admitted >= oldest and estimate > 0 then
    local left = redis.call('HINCRBY', KEYS[1], ARGV[5], '-' .. ARGV[6])
    if left <= 0 then redis.call('HDEL', KEYS[1], ARGV[5]) end
  end
  if actual > 0 then
    redis.call('HINCRBY', KEYS[1], bucket, ARGV[7])
    redis.call('PEXPIRE', KEYS[1], window_ttl)
  end
end
return held
`;

/**
 * KEYS: slots. ARGV: lease id, lease ttl ms. Pushes a held lease's expiry to now + ttl (on Redis's
 * clock, as admit sets it); a lease already released or aged out stays gone.
 */
const REFRESH_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
`;

interface LimitCommands {
  switchyardLimitsPeek(rpmKey: string, tpmKey: string, ...args: string[]): Promise<number[]>;
  switchyardLimitsRefresh(slotsKey: string, ...args: string[]): Promise<number>;
  switchyardLimitsAdmit(rpmKey: string, tpmKey: string, slotsKey: string, ...args: string[]): Promise<number[]>;
  switchyardLimitsRelease(tpmKey: string, slotsKey: string, ...args: string[]): Promise<number>;
}

const REFUSED: Record<number, RefusedLimit> = { 1: "requests", 2: "tokens", 3: "concurrency" };

function connect(redisUrl: string): Redis & LimitCommands {
  const client = new Redis(redisUrl, {
    // Fail a request after a few reconnect attempts rather than queueing it for as long as Redis is down.
    maxRetriesPerRequest: 2,
    connectionName: "switchyard-limits",
  }) as Redis & LimitCommands;
  // Without a listener, a lost connection's 'error' event would crash the process; ioredis reconnects by itself.
  client.on("error", () => undefined);
  client.defineCommand("switchyardLimitsAdmit", { numberOfKeys: 3, lua: ADMIT_LUA });
  client.defineCommand("switchyardLimitsPeek", { numberOfKeys: 2, lua: PEEK_LUA });
  client.defineCommand("switchyardLimitsRelease", { numberOfKeys: 2, lua: RELEASE_LUA });
  client.defineCommand("switchyardLimitsRefresh", { numberOfKeys: 1, lua: REFRESH_LUA });
  return client;
}

/** The admit script's refusal (code, limit, use, both windows, the window's buckets) as the 429 the caller gets. */
function refusal(reply: number[], request: Parameters<RequestLimits["admit"]>[0], limits: ReturnType<typeof effectiveLimits>): Error {
  const [code = -1, max = 0, used = 0, requested = 0, nowMs = 0, rpmUsed = 0, rpmNewest = -1, tpmUsed = 0, tpmNewest = -1, ...flat] = reply;
  const limit = REFUSED[code];
  if (!limit) return new Error(`The Redis admit script answered an unknown code ${code}.`);
  const buckets: Array<[number, number]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) buckets.push([flat[i]!, flat[i + 1]!]);
  const state = limitState(limits, { requests: [rpmUsed, rpmNewest], tokens: [tpmUsed, tpmNewest] }, nowMs);
  return refusalError({ limit, max, used, requested, nowMs, buckets, state }, request);
}

/**
 * A stream may outlive the lease's TTL: the lease is kept alive while the request runs, so only a
 * crashed process's leases age out. Released once: the slot is freed and the estimate replaced by the actual count.
 */
function redisLease(
  client: Redis & LimitCommands,
  keys: { tpmKey: string; slotsKey: string; leaseId: string; leaseTtlMs: number; windowArgs: string[] },
  charged: { chargesTokens: boolean; admittedBucket: number; estimate: number },
): LimitLease {
  const { tpmKey, slotsKey, leaseId, leaseTtlMs, windowArgs } = keys;
  let released = false;
  const refresher = setInterval(
    () => {
      client.switchyardLimitsRefresh(slotsKey, leaseId, String(leaseTtlMs)).catch(() => undefined);
    },
    Math.max(50, Math.floor(leaseTtlMs / 3)),
  );
  refresher.unref();
  return {
    async release(actualTokens) {
      if (released) return;
      released = true;
      clearInterval(refresher);
      const { chargesTokens, admittedBucket, estimate } = charged;
      const actual = String(releasedTokens(actualTokens, estimate));
      await client.switchyardLimitsRelease(
        tpmKey,
        slotsKey,
        ...windowArgs,
        leaseId,
        chargesTokens ? "1" : "0",
        String(admittedBucket),
        String(estimate),
        actual,
      );
    },
  };
}

/**
 * Request limits in Redis, shared by every server process that uses the same Redis (and prefix).
 * The connection is opened at once; ping() to fail fast at startup when Redis is unreachable.
 */
export function createRedisLimits(redisUrl: string, defaults: LimitDefaults, options: RedisLimitsOptions = {}): RedisRequestLimits {
  const prefix = options.keyPrefix ?? "switchyard:limits:";
  const client = connect(redisUrl);
  const leaseTtlMs = options.leaseTtlMs ?? CONCURRENCY_LEASE_TTL_MS;
  const windowArgs = [String(BUCKET_MS), String(WINDOW_BUCKETS)];

  return {
    async peek(request) {
      const limits = effectiveLimits(request.limits, defaults);
      if (limits.requestsPerMinute === null && limits.tokensPerMinute === null) return {};
      const flags = [limits.requestsPerMinute !== null, limits.tokensPerMinute !== null].map((on) => (on ? "1" : "0"));
      const [nowMs = 0, rpmUsed = 0, rpmNewest = -1, tpmUsed = 0, tpmNewest = -1] = await client.switchyardLimitsPeek(
        `${prefix}rpm:${request.keyId}`,
        `${prefix}tpm:${request.keyId}`,
        ...windowArgs,
        ...flags,
      );
      return limitState(limits, { requests: [rpmUsed, rpmNewest], tokens: [tpmUsed, tpmNewest] }, nowMs);
    },
    async admit(request) {
      const limits = effectiveLimits(request.limits, defaults);
      const estimate = assertTokenCount(request.estimatedTokens, "estimatedTokens");
      const rpmKey = `${prefix}rpm:${request.keyId}`;
      const tpmKey = `${prefix}tpm:${request.keyId}`;
      const slotsKey = `${prefix}conc:${request.accountId}:${request.model}`;
      const leaseId = randomUUID();

      const reply = await client.switchyardLimitsAdmit(
        rpmKey,
        tpmKey,
        slotsKey,
        ...windowArgs,
        String(limits.requestsPerMinute ?? -1),
        String(limits.tokensPerMinute ?? -1),
        String(limits.concurrent),
        String(estimate),
        leaseId,
        String(leaseTtlMs),
      );
      const [code = -1] = reply;
      if (code !== 0) throw refusal(reply, request, limits);
      const [, nowMs = 0, admittedBucket = 0, rpmUsed = 0, rpmNewest = -1, tpmUsed = 0, tpmNewest = -1] = reply;
      const charged = { chargesTokens: limits.tokensPerMinute !== null, admittedBucket, estimate };
      // Redis's clock, as the windows are kept on it.
      const state = limitState(limits, { requests: [rpmUsed, rpmNewest], tokens: [tpmUsed, tpmNewest] }, nowMs);
      return { ...redisLease(client, { tpmKey, slotsKey, leaseId, leaseTtlMs, windowArgs }, charged), state };
    },
    async ping() {
      await client.ping();
    },
    async close() {
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
