import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Big from "big.js";
import { api, waitForDeployment } from "../helpers/deployments.js";
import { adminKey, adminCall, postChat, SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

/**
 * Issue 20, items 2 and 8, as the hostile tenant sent them: deploying needs a right of its own,
 * honours the key's model list and budget, is capped per account and checked against memory; and
 * disabling an account stops its instances and their billing at once.
 */
const ATTACK = { model: SMOLLM2, name: "hog", max_batch_size: 32, max_instances: 4 };
// 300 ms ticks, 2 s segments (0.0002 USD each at SmolLM2's 0.36/h), 1024-token context.
// Instances: ~390 MB at batch 1 (98 MB weights + 24 MB KV + 256 MiB overhead); 1.1 GB at batch 32.
const ENV = {
  SWITCHYARD_DEPLOYMENT_TICK_MS: "300",
  SWITCHYARD_DEPLOYMENT_SEGMENT_S: "2",
  SWITCHYARD_MAX_CONTEXT: "1024",
  SWITCHYARD_PARALLEL: "2",
  SWITCHYARD_MAX_DEPLOYMENTS_PER_ACCOUNT: "2",
  SWITCHYARD_MAX_INSTANCES_PER_ACCOUNT: "4",
  SWITCHYARD_MAX_DEPLOYMENT_BATCH: "32",
  // What deployments may take here: one batch-1 instance fits, the attack's batch 32 does not. A
  // real out-of-memory kill cannot be caused safely, so the test sizes the memory, not the machine.
  SWITCHYARD_DEPLOYMENT_MEMORY_BYTES: String(800 * 1000 * 1000),
};

describe("tenant guards on dedicated deployments (issue 20, items 2 and 8)", () => {
  let server: RunningServer;
  let deployer = "";
  before(async () => {
    server = await startServer({ env: ENV });
    deployer = await adminKey(server, "tester", { manage_deployments: true });
  });
  after(async () => server?.stop());

  const admin = (path: string, method = "POST") => adminCall(server, method, path);
  const usageSeconds = async (key: string) => {
    const text = await (await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).text();
    return new Big(/"deployments":\{"instance_seconds":([0-9.]+)/.exec(text)![1]!);
  };

  test("a key without the manage-deployments right gets a 403 for the attack, and for scaling and deleting; reading is allowed", async () => {
    const refused = await api(server, server.key, "POST", "/v1/deployments", ATTACK);
    assert.equal(refused.status, 403);
    assert.deepEqual(refused.body.error, {
      message: "This API key cannot manage deployments. Use a key of this account created with the manage-deployments right.",
      type: "permission_error",
      param: null,
      code: "missing_manage_deployments_right",
    });
    const stopped = await api(server, deployer, "POST", "/v1/deployments", { model: SMOLLM2, name: "idle", min_instances: 0 });
    assert.equal(stopped.status, 200);
    assert.equal((await api(server, server.key, "PATCH", `/v1/deployments/${stopped.body.id}`, { min_instances: 1 })).status, 403);
    assert.equal((await api(server, server.key, "DELETE", `/v1/deployments/${stopped.body.id}`)).status, 403);
    const listed = await api(server, server.key, "GET", "/v1/deployments");
    assert.deepEqual(
      listed.body.data.map((d: { name: string }) => d.name),
      ["idle"],
      "the 403 created nothing; a plain key still lists",
    );
    assert.equal(
      (await api(server, server.key, "GET", `/v1/deployments/${stopped.body.id}`)).body.settings.min_instances,
      0,
      "and was not scaled",
    );
    assert.equal((await api(server, deployer, "DELETE", `/v1/deployments/${stopped.body.id}`)).body.status, "deleted");
  });

  test("a key whose model list leaves out the base model cannot deploy it: the 404 chat gives for it", async () => {
    const narrow = await adminKey(server, "tester", { manage_deployments: true, allowed_models: ["google/gemma-3-270m"] });
    const refused = await api(server, narrow, "POST", "/v1/deployments", ATTACK);
    const chat = await postChat(server, { model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }, { key: narrow });
    assert.equal(refused.status, 404);
    assert.equal(chat.status, 404);
    assert.deepEqual(refused.body.error, ((await chat.json()) as { error: unknown }).error);
  });

  test("a key whose budget is used up creates nothing: 402, however often it tries", async () => {
    const broke = await adminKey(server, "broke", { manage_deployments: true, budget_usd: "0" });
    for (let i = 0; i < 5; i++) {
      for (const body of [ATTACK, { model: SMOLLM2, name: `quiet-${i}`, min_instances: 0 }]) {
        const refused = await api(server, broke, "POST", "/v1/deployments", body);
        assert.equal(refused.status, 402, JSON.stringify(refused.body));
        assert.equal(refused.body.error.type, "insufficient_quota");
        assert.equal(refused.body.error.code, "insufficient_quota");
      }
    }
    assert.deepEqual((await api(server, broke, "GET", "/v1/deployments")).body.data, []);
  });

  test("per-account caps: deployments and instances (max_instances summed) past them are a 400 that says which", async () => {
    const make = (name: string, extra: object = {}) =>
      api(server, deployer, "POST", "/v1/deployments", { model: SMOLLM2, name, min_instances: 0, ...extra });
    const first = await make("cap-1", { max_instances: 3 });
    assert.equal(first.status, 200);
    const tooWide = await make("cap-2", { max_instances: 2 });
    assert.equal(tooWide.status, 400);
    assert.equal(tooWide.body.error.code, "too_many_instances");
    assert.equal(tooWide.body.error.param, "max_instances");
    const second = await make("cap-2");
    assert.equal(second.status, 200);
    const third = await make("cap-3");
    assert.equal(third.status, 400);
    assert.equal(third.body.error.code, "too_many_deployments");
    const widened = await api(server, deployer, "PATCH", `/v1/deployments/${second.body.id}`, { max_instances: 2 });
    assert.equal(widened.body.error.code, "too_many_instances", "scaling is capped too");
    for (const { body } of [first, second]) await api(server, deployer, "DELETE", `/v1/deployments/${body.id}`);
    assert.equal((await make("cap-3")).status, 200, "a deleted deployment frees its place");
    await api(server, deployer, "DELETE", `/v1/deployments/${(await api(server, deployer, "GET", "/v1/deployments")).body.data[0].id}`);
  });

  test("the attack's batch 32 does not fit the memory left: a 400 insufficient_memory before anything loads, and the server lives on", async () => {
    const refused = await api(server, deployer, "POST", "/v1/deployments", ATTACK);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, "insufficient_memory");
    assert.equal(refused.body.error.param, "max_batch_size");
    assert.match(refused.body.error.message, /Not enough memory/);
    assert.deepEqual((await api(server, deployer, "GET", "/v1/deployments")).body.data, []);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });

  test("context_length sizes the KV cache: batch 32 of 256-token sequences fits where 1024 did not, and serves within it", async () => {
    const created = await api(server, deployer, "POST", "/v1/deployments", {
      ...ATTACK,
      name: "slim",
      max_instances: 1,
      context_length: 256,
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.equal(created.body.settings.context_length, 256);
    await waitForDeployment(server, deployer, created.body.id, (d) => d.status === "running");
    const chat = (content: string, max_tokens: number) =>
      api(server, deployer, "POST", "/v1/compat/chat/completions", {
        model: "tester/slim",
        messages: [{ role: "user", content }],
        max_tokens,
      });
    assert.equal((await chat("Hi!", 4)).status, 200);
    const tooLong = await chat("Hi!", 300);
    assert.equal(tooLong.status, 400);
    assert.equal(tooLong.body.error.code, "context_length_exceeded");
    assert.match(tooLong.body.error.message, /maximum context length is 256 tokens/);
    assert.equal((await api(server, deployer, "DELETE", `/v1/deployments/${created.body.id}`)).body.status, "deleted");
  });

  test("an instance holds its key's budget ahead; when the next segment is not covered it stops, spend within the budget, exactly billed", async () => {
    // 0.0005 covers two 2 s segments and a half: the instance runs ~4 s, then stops.
    const thrifty = await adminKey(server, "thrifty", { manage_deployments: true, budget_usd: "0.0005" });
    const created = await api(server, thrifty, "POST", "/v1/deployments", { model: SMOLLM2, name: "thrift", max_batch_size: 1 });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    // `failed` is set when the billing stops; the instance then unloads, which a busy machine can take a moment over.
    const failed = await waitForDeployment(server, thrifty, created.body.id, (d) => d.status === "failed" && d.instances.running === 0);
    assert.match(failed.fail_reason, /budget/);
    assert.deepEqual(failed.instances, { running: 0, pending: 0 });
    assert.equal(failed.settings.min_instances, 0, "it stays down: nothing starts it again until it is scaled up");
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const still = await api(server, thrifty, "GET", `/v1/deployments/${created.body.id}`);
    assert.equal(still.body.status, "failed");
    const [key] = (await admin("/admin/v1/keys?account=thrifty", "GET")).body.data;
    const usage = (await admin("/admin/v1/usage?account=thrifty", "GET")).body;
    const spent = new Big(key.spent_usd);
    assert.equal(spent.toFixed(), new Big(usage.deployments.cost_usd).toFixed(), "the key's spend is exactly the instance time billed");
    assert.ok(spent.gte("0.0004") && spent.lte("0.0005"), `spent ${spent.toFixed()} of 0.0005`);
    const later = await api(server, thrifty, "PATCH", `/v1/deployments/${created.body.id}`, { min_instances: 1 });
    assert.equal(later.status, 402, "scaling up again needs budget too");
  });

  test("disabling an account stops its instances at once; nothing is billed after", async () => {
    const victim = await adminKey(server, "victim", { manage_deployments: true });
    const requested = Date.now();
    const created = await api(server, victim, "POST", "/v1/deployments", { model: SMOLLM2, name: "kept", max_batch_size: 1 });
    await waitForDeployment(server, victim, created.body.id, (d) => d.status === "running");
    const running = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = Date.now();
    const disabled = await admin("/admin/v1/accounts/victim/disable");
    const answered = Date.now();
    assert.equal(disabled.status, 200);
    assert.equal(disabled.body.disabled, true);
    assert.equal((await api(server, victim, "GET", "/v1/deployments")).status, 401, "its keys are refused");
    // Longer than a billed segment: a running instance would have billed another one.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await admin("/admin/v1/accounts/victim/enable");
    const seen = await api(server, victim, "GET", `/v1/deployments/${created.body.id}`);
    assert.equal(seen.body.status, "stopped");
    assert.deepEqual(seen.body.instances, { running: 0, pending: 0 });
    assert.equal(seen.body.settings.min_instances, 0);
    assert.match(seen.body.fail_reason, /disabled/);
    // Billed from when it started (after the create was sent) to the disable (before its answer), no more.
    const billed = await usageSeconds(victim);
    assert.ok(billed.gte(new Big(before - running).div(1000)), `billed ${billed.toFixed()} s`);
    assert.ok(billed.lte(new Big(answered - requested).div(1000)), `billed ${billed.toFixed()} s`);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    assert.equal((await usageSeconds(victim)).toFixed(), billed.toFixed(), "nothing more after the disable");
  });
});
