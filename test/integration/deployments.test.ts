import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import Big from "big.js";
import OpenAI from "openai";
import { api, waitForDeployment } from "../helpers/deployments.js";
import { adminKey, cli, SMOLLM2, startServer, type RunningServer, SMOLLM2_NO_END } from "../helpers/server.js";

/**
 * Issue 13, section 1: a dedicated deployment's whole life on the real model over real HTTP:
 * create, call it by its private id with the openai client, scale, stop, delete while a stream
 * runs (it drains), its isolation from other accounts, and its instance time billed exactly.
 */
const TICK = {
  SWITCHYARD_DEPLOYMENT_TICK_MS: "300",
  SWITCHYARD_DEPLOYMENT_SEGMENT_S: "2",
  SWITCHYARD_MAX_CONTEXT: "1024",
  SWITCHYARD_PARALLEL: "2",
};
const PER_SECOND = new Big("0.36").div(3600); // SmolLM2's dedicated_instance_hour, per second: 0.0001 exactly

/** Exact instance time and its cost, from the caller's own /v1/usage (numbers kept as their text). */
async function instanceTime(server: RunningServer, key: string): Promise<{ seconds: Big; cost: Big }> {
  const response = await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
  const text = await response.text();
  const seconds = /"deployments":\{"instance_seconds":([0-9.]+),"cost_usd":([0-9.]+)/.exec(text);
  assert.ok(seconds, text);
  return { seconds: new Big(seconds[1]!), cost: new Big(seconds[2]!) };
}

describe("a dedicated deployment's lifecycle, isolation and billing", () => {
  let server: RunningServer;
  let other = "";
  let catalogDir = "";
  before(async () => {
    catalogDir = mkdtempSync(join(tmpdir(), "switchyard-dep-catalog-"));
    const broken = {
      id: "test/broken-dedicated",
      source: "file:/nonexistent/broken.gguf",
      context_length: 2048,
      precision: "q4_1",
      tags: [],
      pricing: { input: "1", output: "1", cached_input: "1", dedicated_instance_hour: "1" },
      created: 0,
      dedicated: true,
    };
    writeFileSync(join(catalogDir, "catalog.json"), JSON.stringify({ models: [broken] }));
    server = await startServer({
      env: { ...TICK, SWITCHYARD_CATALOG: join(catalogDir, "catalog.json") },
      keyArgs: ["--manage-deployments"],
    });
    // With the right too, so that its 404s show isolation, not the missing right.
    other = await adminKey(server, "someone-else", { manage_deployments: true });
  });
  after(async () => {
    await server?.stop();
    rmSync(catalogDir, { recursive: true, force: true });
  });

  test("bad input is a 400 that says why", async () => {
    const post = (body: unknown) => api(server, server.key, "POST", "/v1/deployments", body);
    const gemma = await post({ model: "google/gemma-3-270m", name: "g" });
    assert.equal(gemma.status, 400);
    assert.equal(gemma.body.error.code, "model_not_deployable");
    assert.match(gemma.body.error.message, /does not support dedicated endpoints.*SmolLM2/);
    assert.equal((await post({ model: "nobody/nothing", name: "n" })).body.error.code, "model_not_found");
    for (const [body, param] of [
      [{ model: SMOLLM2, name: "x", min_instances: 2, max_instances: 1 }, "min_instances"],
      [{ model: SMOLLM2, name: "x", max_instances: 99 }, "max_instances"],
      [{ model: SMOLLM2, name: "x", min_instances: -1 }, "min_instances"],
      [{ model: SMOLLM2, name: "x", max_batch_size: 0 }, "max_batch_size"],
      [{ model: SMOLLM2, name: "x", max_batch_size: 1.5 }, "max_batch_size"],
      [{ model: SMOLLM2, name: "no/slash" }, "name"],
      [{ model: SMOLLM2, name: "x", account: "someone-else" }, null],
    ] as const) {
      const reply = await post(body);
      assert.equal(reply.status, 400, JSON.stringify(body));
      assert.equal(reply.body.error.param, param, JSON.stringify(reply.body));
    }
  });

  test("a model that cannot be loaded is reported failed, with the reason", async () => {
    const created = await api(server, server.key, "POST", "/v1/deployments", { model: "test/broken-dedicated", name: "broken" });
    assert.equal(created.status, 200);
    const failed = await waitForDeployment(server, server.key, created.body.id, (d) => d.status === "failed");
    assert.match(failed.fail_reason, /could not be loaded/);
    assert.deepEqual(failed.instances, { running: 0, pending: 0 });
    assert.equal((await api(server, server.key, "DELETE", `/v1/deployments/${created.body.id}`)).body.status, "deleted");
  });

  test("create → running → called by its private id → scaled → stopped → deleted while a stream drains", async () => {
    const created = await api(server, server.key, "POST", "/v1/deployments", {
      model: SMOLLM2,
      name: "bot",
      min_instances: 1,
      max_instances: 2,
      max_batch_size: 2,
    });
    assert.equal(created.status, 200);
    const d = created.body;
    assert.match(d.id, /^dep_/);
    assert.equal(d.object, "deployment");
    assert.equal(d.model_id, "tester/bot");
    assert.deepEqual(d.settings, { min_instances: 1, max_instances: 2, max_batch_size: 2, context_length: null });
    const duplicate = await api(server, server.key, "POST", "/v1/deployments", { model: SMOLLM2, name: "bot" });
    assert.equal(duplicate.status, 400);
    assert.equal(duplicate.body.error.code, "deployment_exists");

    const running = await waitForDeployment(server, server.key, d.id, (x) => x.status === "running");
    assert.deepEqual(running.instances, { running: 1, pending: 0 });

    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
    const reply = await client.chat.completions.create({
      model: "tester/bot",
      messages: [{ role: "user", content: "Hi!" }],
      max_tokens: 8,
    });
    assert.equal(reply.model, "tester/bot");
    assert.ok((reply.choices[0]!.message.content ?? "").length > 0);
    assert.equal((reply.usage as unknown as { estimated_cost: number }).estimated_cost, 0, "instance time is what is billed");
    const models = await client.models.list();
    assert.ok(
      models.data.some((m) => m.id === "tester/bot"),
      "the owner sees its deployment in the models list",
    );

    // Scaled up: two instances, both billed; the requests still answer.
    const scaled = await api(server, server.key, "PATCH", `/v1/deployments/${d.id}`, { min_instances: 2 });
    assert.equal(scaled.status, 200);
    await waitForDeployment(server, server.key, d.id, (x) => x.status === "running" && x.instances.running === 2);
    const both = await Promise.all(
      [0, 1].map(() =>
        client.chat.completions.create({ model: "tester/bot", messages: [{ role: "user", content: "Count to three." }], max_tokens: 8 }),
      ),
    );
    assert.equal(both.length, 2);

    // Scaled to zero: stopped, a clear 503, and no more instance time.
    await api(server, server.key, "PATCH", `/v1/deployments/${d.id}`, { min_instances: 0 });
    await waitForDeployment(server, server.key, d.id, (x) => x.status === "stopped" && x.instances.running === 0);
    const stopped = await client.chat.completions
      .create({ model: "tester/bot", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 })
      .catch((e) => e);
    assert.equal(stopped.status, 503);
    assert.equal(stopped.code, "deployment_stopped");
    const first = await instanceTime(server, server.key);
    await new Promise((r) => setTimeout(r, 1500));
    const later = await instanceTime(server, server.key);
    assert.ok(first.seconds.gt(0));
    assert.equal(later.seconds.toFixed(), first.seconds.toFixed(), "a stopped deployment is not billed");
    assert.equal(later.cost.toFixed(), later.seconds.times(PER_SECOND).toFixed(), "cost = seconds × hourly price ÷ 3600, exactly");

    // Deleted while a stream runs: the stream finishes, then it is gone.
    await api(server, server.key, "PATCH", `/v1/deployments/${d.id}`, { min_instances: 1 });
    await waitForDeployment(server, server.key, d.id, (x) => x.status === "running" && x.instances.running === 1);
    const stream = await client.chat.completions.create({
      model: "tester/bot",
      messages: [{ role: "user", content: "Tell a long story." }],
      max_tokens: 48,
      stream: true,
      logit_bias: SMOLLM2_NO_END,
    });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const deleting = api(server, server.key, "DELETE", `/v1/deployments/${d.id}`);
    let finish: string | null | undefined;
    for (let chunk = await iterator.next(); !chunk.done; chunk = await iterator.next())
      finish = chunk.value.choices[0]?.finish_reason ?? finish;
    assert.equal(finish, "length", "the stream in flight ran to its end");
    const deleted = await deleting;
    assert.equal(deleted.status, 200);
    assert.equal(deleted.body.status, "deleted");
    const gone = await client.chat.completions
      .create({ model: "tester/bot", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 })
      .catch((e) => e);
    assert.equal(gone.status, 404);
    const list = await api(server, server.key, "GET", "/v1/deployments");
    assert.ok(!list.body.data.some((x: { id: string }) => x.id === d.id));
    assert.equal((await api(server, server.key, "GET", "/v1/deployments?status=deleted")).body.data[0].id, d.id);
    const billed = await instanceTime(server, server.key);
    assert.equal(billed.cost.toFixed(), billed.seconds.times(PER_SECOND).toFixed());
  });

  test("another account cannot see or call it: the same 404 as for nothing at all", async () => {
    const created = await api(server, server.key, "POST", "/v1/deployments", { model: SMOLLM2, name: "private", max_batch_size: 1 });
    await waitForDeployment(server, server.key, created.body.id, (x) => x.status === "running");
    const chat = (model: string) =>
      api(server, other, "POST", "/v1/compat/chat/completions", { model, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });
    const theirs = await chat("tester/private");
    const nothing = await chat("tester/nothing");
    assert.equal(theirs.status, 404);
    assert.equal(theirs.body.error.code, "model_not_found");
    assert.deepEqual(theirs.body, JSON.parse(JSON.stringify(nothing.body).replaceAll("tester/nothing", "tester/private")));
    const models = await api(server, other, "GET", "/v1/compat/models");
    assert.ok(!models.body.data.some((m: { id: string }) => m.id.startsWith("tester/")));
    assert.equal((await api(server, other, "GET", "/v1/compat/models/tester/private")).status, 404);
    const get = await api(server, other, "GET", `/v1/deployments/${created.body.id}`);
    const none = await api(server, other, "GET", "/v1/deployments/dep_doesnotexist");
    assert.equal(get.status, 404);
    assert.deepEqual(get.body, JSON.parse(JSON.stringify(none.body).replaceAll("dep_doesnotexist", created.body.id)));
    for (const [method, body] of [
      ["PATCH", { min_instances: 0 }],
      ["DELETE", undefined],
    ] as const) {
      assert.equal((await api(server, other, method, `/v1/deployments/${created.body.id}`, body)).status, 404);
    }
    assert.equal((await api(server, other, "GET", "/v1/deployments")).body.data.length, 0);
    // Public /health and /metrics never name it.
    assert.doesNotMatch(await (await fetch(`${server.url}/health`)).text(), /tester\/private/);
    assert.doesNotMatch(await (await fetch(`${server.url}/metrics`)).text(), /tester\/private/);
    // Its own account still can.
    assert.equal(
      (
        await api(server, server.key, "POST", "/v1/compat/chat/completions", {
          model: "tester/private",
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 4,
        })
      ).status,
      200,
    );
    await api(server, server.key, "DELETE", `/v1/deployments/${created.body.id}`);
  });

  test("the CLI creates, lists, scales and deletes with an account key", () => {
    const env = { SWITCHYARD_API_KEY: server.key };
    const run = (...args: string[]) => cli(["deployments", ...args, "--data-dir", server.dataDir], env);
    const created = JSON.parse(run("create", "--model", SMOLLM2, "--name", "cli-bot", "--min-instances", "0", "--json"));
    assert.equal(created.status, "stopped");
    assert.match(run("list"), /cli-bot\s+.*stopped/);
    const scaled = JSON.parse(run("scale", created.id, "--min-instances", "1", "--wait", "--json"));
    assert.equal(scaled.status, "running");
    assert.equal(scaled.instances.running, 1);
    assert.match(run("get", created.id), /tester\/cli-bot/);
    assert.match(run("delete", created.id), /deleted/);
    assert.throws(() => cli(["deployments", "list", "--data-dir", server.dataDir]), /API key is needed/);
  });
});
