import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { GEMMA, postChat, SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";
import { smolStandardUnits } from "../helpers/usage.js";

describe("both default models served at once, with their prices and tiers", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer({ models: [SMOLLM2, GEMMA], exclusive: true });
  });
  after(async () => {
    await server?.stop();
  });

  test("the models list shows context, precision, tags and exact prices per tier", async () => {
    const response = await fetch(`${server.baseURL}/models`, { headers: { authorization: `Bearer ${server.key}` } });
    assert.equal(response.status, 200);
    const raw = await response.text();
    const body = JSON.parse(raw);
    assert.equal(body.object, "list");
    assert.deepEqual(body.data.map((m: { id: string }) => m.id).sort(), [SMOLLM2, GEMMA].sort());
    const smol = body.data.find((m: { id: string }) => m.id === SMOLLM2);
    assert.equal(smol.object, "model");
    assert.equal(smol.owned_by, "HuggingFaceTB");
    assert.ok(Number.isInteger(smol.created));
    assert.equal(smol.metadata.context_length, 8192);
    assert.equal(smol.metadata.precision, "q4_1");
    assert.deepEqual(smol.metadata.tags, ["JSON", "Function"]);
    const pricing = smol.metadata.pricing;
    assert.deepEqual(pricing.list, { input: 0.02, output: 0.06, cached_input: 0.01 });
    assert.deepEqual(pricing.tiers.default, { input: 0.02, output: 0.06, cached_input: 0.01 });
    assert.equal(pricing.tiers.priority.output, 0.09);
    assert.equal(pricing.tiers.flex.input, 0.016);
    assert.doesNotMatch(raw, /\de-\d/, "prices are written as plain decimals");

    const one = await fetch(`${server.baseURL}/models/${GEMMA}`, { headers: { authorization: `Bearer ${server.key}` } });
    assert.equal((await one.json()).id, GEMMA);
  });

  test("Gemma generates through its fallback chat template while SmolLM2 is loaded too", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL });
    const [gemma, smol] = await Promise.all([
      client.chat.completions.create({
        model: GEMMA,
        messages: [{ role: "user", content: "The capital of France is" }],
        max_tokens: 16,
        temperature: 0,
      }),
      client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi!" }], max_tokens: 16, temperature: 0 }),
    ]);
    assert.equal(gemma.model, GEMMA);
    assert.ok((gemma.choices[0]!.message.content ?? "").length > 0);
    assert.doesNotMatch(gemma.choices[0]!.message.content ?? "", /<end_of_turn>|<start_of_turn>/);
    assert.ok((smol.choices[0]!.message.content ?? "").length > 0);
  });

  test("service_tier is applied, echoed and priced: priority 1.5x, flex 0.8x, auto is default", async () => {
    const body = (tier: string) => ({
      model: SMOLLM2,
      messages: [{ role: "user", content: "Say yes." }],
      max_tokens: 5,
      temperature: 0,
      service_tier: tier,
    });
    const standard = await (await postChat(server, body("default"))).json();
    const priority = await (await postChat(server, body("priority"))).json();
    const flex = await (await postChat(server, body("flex"))).json();
    const auto = await (await postChat(server, body("auto"))).json();
    assert.equal(standard.service_tier, "default");
    assert.equal(priority.service_tier, "priority");
    assert.equal(flex.service_tier, "flex");
    assert.equal(auto.service_tier, "default");
    const units = smolStandardUnits; // the repeated prompt hits the prefix cache
    assert.equal(standard.usage.estimated_cost, units(standard.usage) / 1e8);
    assert.ok(Math.abs(priority.usage.estimated_cost - (units(priority.usage) * 1.5) / 1e8) < 1e-15);
    assert.ok(Math.abs(flex.usage.estimated_cost - (units(flex.usage) * 0.8) / 1e8) < 1e-15);
    const chunks = await (await postChat(server, { ...body("priority"), stream: true })).text();
    for (const line of chunks.split("\n\n").filter((l) => l.startsWith("data: {")))
      assert.equal(JSON.parse(line.slice(6)).service_tier, "priority");
  });
});
