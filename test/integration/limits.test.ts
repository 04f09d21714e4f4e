import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createTestDatabase, type TestDatabase } from "../helpers/databases.js";
import { adminKey, postChat, startServer, SMOLLM2, type RunningServer } from "../helpers/server.js";
import { smolStandardUnits } from "../helpers/usage.js";

const ask = (extra: Record<string, unknown> = {}) => ({
  model: SMOLLM2,
  messages: [{ role: "user", content: "Say one word." }],
  max_tokens: 8,
  temperature: 0,
  ...extra,
});
const asKey = (server: RunningServer, key: string) => ({ ...server, key });

/** Both servers of a shared-limits test use one PostgreSQL database, so a key works on either. */
describe("limits and budgets, on PostgreSQL and Redis shared by two server processes", () => {
  let database: TestDatabase;
  let a: RunningServer;
  let b: RunningServer;
  before(async () => {
    database = await createTestDatabase("postgres");
    // Two servers on one machine: one llama.cpp thread each, or their workers fight over the cores.
    const env = {
      SWITCHYARD_THREADS: "1",
      SWITCHYARD_DATABASE_URL: database.url!,
      SWITCHYARD_REDIS_URL: "redis://127.0.0.1:6379",
      SWITCHYARD_MAX_CONCURRENT_PER_MODEL: "6",
    };
    [a, b] = await Promise.all([startServer({ env }), startServer({ env })]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await database?.dispose();
  });

  test("requests per minute are counted across both processes, with Retry-After", async () => {
    const key = await adminKey(a, "rpm-account", { rpm_limit: 4 });
    // All six arrive together (admission happens before any generation), so the minute cannot slide.
    const responses = await Promise.all([a, b, a, b, a, b].map((server) => postChat(asKey(server, key), ask({ max_tokens: 2 }))));
    const statuses = responses.map((r) => r.status).sort();
    const refused = responses.filter((r) => r.status === 429);
    const retryAfter = refused[0]?.headers.get("retry-after") ?? null;
    for (const r of refused) assert.equal((await r.json()).error.code, "rate_limit_exceeded");
    await Promise.all(responses.filter((r) => r.status !== 429).map((r) => r.arrayBuffer()));
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
    assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, `Retry-After ${retryAfter}`);
  });

  test("concurrent requests per account and model are capped across both processes", async () => {
    const key = await adminKey(a, "busy-account");
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => postChat(asKey(i % 2 ? b : a, key), ask({ max_tokens: 40, stream: true }))),
    );
    const statuses = responses.map((r) => r.status).sort();
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    assert.equal(statuses.filter((s) => s === 200).length, 6, `statuses ${statuses}`);
    assert.equal(statuses.filter((s) => s === 429).length, 4);
  });

  test("a race of many requests against a small budget never overshoots it", async () => {
    // Worst case per request: ~35 prompt tokens x 0.02 + 8 completion x 0.06 per 1M = ~1.2e-6 USD.
    const budget = "0.000006";
    const key = await adminKey(a, "budget-account", { budget_usd: budget });
    const responses = await Promise.all(Array.from({ length: 24 }, (_, i) => postChat(asKey(i % 2 ? b : a, key), ask())));
    const ok = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status === 402);
    assert.equal(ok.length + refused.length, 24);
    assert.ok(ok.length >= 1 && refused.length >= 1, `${ok.length} served, ${refused.length} refused`);
    const bodies = await Promise.all(ok.map((r) => r.json()));
    const spentUnits = bodies.reduce((sum, body) => sum + smolStandardUnits(body.usage), 0); // 1e-8 USD
    assert.ok(spentUnits <= 600, `spent ${spentUnits}e-8 USD of a 600e-8 budget`);
    for (const r of refused) assert.equal((await r.json()).error.code, "insufficient_quota");
    const usage = await (await fetch(`${a.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).json();
    assert.ok(usage.totals.cost_usd <= Number(budget));
    assert.equal(usage.totals.by_status.rejected, refused.length, "refusals are recorded at no charge");
  });
});
