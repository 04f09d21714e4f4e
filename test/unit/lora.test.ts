import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { AdapterTurns, MAX_PASSED_STEPS, TURN_STEPS } from "../../src/engine/core/adapter-turns.js";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { StepCostModel } from "../../src/engine/core/cost-model.js";
import { ShardScheduler } from "../../src/engine/core/scheduler.js";
import { cacheNamespaceOf } from "../../src/engine/shard-router.js";
import { step, GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";
import { parseCatalog, resolveAdapters } from "../../src/catalog/load.js";
import { checkBaseName, loraAlpha, loraTensorName, permuteRows } from "../../src/catalog/convert/peft-lora.js";
import { checkGgufLora, checkLoraAgainstBase } from "../../src/catalog/convert/lora-checks.js";
import type { GgufLayout } from "../../src/catalog/gguf/layout.js";
import type { ServiceTier } from "../../src/protocol/tiers.js";

const texts = { pieceBytes: () => new Uint8Array([97]), tokenText: () => "a", isEndOfGeneration: () => false };

function request(adapter: string | undefined, tier: ServiceTier = "default"): EngineRequest {
  const spec = { promptTokens: [1, 2, 3], maxTokens: 100, sampling: { temperature: 0, topP: 1 }, stop: [], tier };
  return new EngineRequest(spec, SAMPLER, adapter === undefined ? undefined : { key: adapter, handle: BigInt(adapter.length * 16) });
}

describe("adapter groups take turns in a shard's steps", () => {
  test("one group: every request, nothing left out", () => {
    const turns = new AdapterTurns();
    const all = [request(undefined), request(undefined)];
    assert.deepEqual(turns.choose(all), { chosen: all, leftOut: false });
  });

  const turn = (key: string) => Array.from({ length: TURN_STEPS }, () => key);

  test("two groups of one tier alternate in turns of TURN_STEPS steps (each switch rebuilds llama.cpp's graphs)", () => {
    const turns = new AdapterTurns();
    const all = [request(undefined), request("a"), request(undefined), request("a")];
    const keys = Array.from({ length: 3 * TURN_STEPS }, () => turns.choose(all).chosen.map((r) => r.adapter?.key ?? ""));
    for (const chosen of keys) assert.equal(new Set(chosen).size, 1, "a step runs one adapter's requests");
    assert.deepEqual(
      keys.map((k) => k[0]),
      [...turn(""), ...turn("a"), ...turn("")],
    );
    assert.ok(TURN_STEPS > 1);
  });

  test("three groups of one tier go round, a turn each", () => {
    const turns = new AdapterTurns();
    const all = [request("b"), request(undefined), request("a")];
    const keys = Array.from({ length: 4 * TURN_STEPS }, () => turns.choose(all).chosen[0]!.adapter?.key ?? "");
    assert.deepEqual(keys, [...turn("b"), ...turn(""), ...turn("a"), ...turn("b")]);
  });

  test("priority groups keep turns of one step (their inter-token target)", () => {
    const turns = new AdapterTurns();
    const all = [request(undefined, "priority"), request("a", "priority")];
    const keys = Array.from({ length: 4 }, () => turns.choose(all).chosen[0]!.adapter?.key ?? "");
    assert.deepEqual(keys, ["", "a", "", "a"]);
  });

  test("a turn ends at once when another group gets a more demanding tier", () => {
    const turns = new AdapterTurns();
    const [base, lora] = [request(undefined, "flex"), request("a", "flex")];
    assert.equal(turns.choose([base, lora]).chosen[0], base, "the first turn is the base's");
    const urgent = request("a", "priority");
    assert.deepEqual(turns.choose([urgent, base, lora]).chosen, [urgent, lora], "the priority request's group goes next");
  });

  test("a priority group goes first, but a cheaper one is never passed over more than MAX_PASSED_STEPS steps", () => {
    const turns = new AdapterTurns();
    const all = [request("p", "priority"), request(undefined, "flex")];
    const keys = Array.from({ length: 9 }, () => turns.choose(all).chosen[0]!.adapter?.key ?? "");
    assert.deepEqual(keys, ["p", "p", "", "p", "p", "", "p", "p", ""]);
    assert.equal(MAX_PASSED_STEPS, 2);
  });

  test("the scheduler plans one adapter per step, with its handle, and counts the others as waiting their turn", () => {
    const scheduler = new ShardScheduler(
      { sequences: 4, cellsPerSequence: 256, stepTokens: 64, prefixCache: true, stallTimeoutMs: 60_000 },
      tieredPolicy,
      texts,
      new StepCostModel({ prior: [0, 0, 0, 0] }),
    );
    const [base, lora] = [request(undefined), request("lora")];
    scheduler.enqueue(base);
    scheduler.enqueue(lora);
    const plans = Array.from({ length: TURN_STEPS + 1 }, () => step(scheduler));
    assert.deepEqual(
      plans.map((p) => p.scheduled.map((s) => s.request)),
      [...Array.from({ length: TURN_STEPS }, () => [base]), [lora]],
    );
    assert.deepEqual(
      plans.map((p) => p.adapter),
      [...Array.from({ length: TURN_STEPS }, () => 0n), lora.adapter!.handle],
    );
    assert.ok(plans.every((p) => p.full));
  });

  test("the prefix cache's namespace carries the adapter", () => {
    assert.equal(cacheNamespaceOf({ cacheNamespace: "acct" }), "acct");
    assert.notEqual(cacheNamespaceOf({ cacheNamespace: "acct", adapter: "x/y" }), "acct");
    assert.notEqual(
      cacheNamespaceOf({ cacheNamespace: "acct", adapter: "x/y" }),
      cacheNamespaceOf({ cacheNamespace: "acct", adapter: "x/z" }),
    );
    assert.equal(cacheNamespaceOf({ adapter: "x/y" }), undefined);
  });
});

const base = {
  id: "acme/base",
  source: "file:/models/base.gguf",
  context_length: 4096,
  precision: "q4_1",
  tags: ["JSON" as const],
  pricing: { input: "0.10", output: "0.30", cached_input: "0.05" },
  created: 1700000000,
};
const adapter = {
  ...base,
  id: "acme/base-lora",
  source: "file:/adapters/peft",
  precision: "f32",
  adapter_of: "acme/base",
  pricing: undefined,
};

describe("catalog entries with adapter_of", () => {
  test("an adapter without pricing takes its base's; with pricing keeps its own", () => {
    const [, resolved] = resolveAdapters(parseCatalog({ models: [base, { ...adapter, pricing: undefined }] }, "/c.json"));
    assert.deepEqual(resolved!.pricing, base.pricing);
    const own = { input: "1", output: "2", cached_input: "0.5" };
    assert.deepEqual(resolveAdapters(parseCatalog({ models: [base, { ...adapter, pricing: own }] }, "/c.json"))[1]!.pricing, own);
  });

  test("refused: a missing base, an adapter of an adapter, a non-file source, and pricing missing from a model", () => {
    assert.throws(
      () => resolveAdapters(parseCatalog({ models: [adapter] }, "/c.json")),
      /adapter of 'acme\/base', which is not in the catalog/,
    );
    const second = { ...adapter, id: "acme/second", adapter_of: adapter.id };
    assert.throws(() => resolveAdapters(parseCatalog({ models: [base, adapter, second] }, "/c.json")), /which is an adapter itself/);
    assert.throws(() => parseCatalog({ models: [{ ...adapter, source: "pypi:x==1" }] }, "/c.json"), /needs a 'file:' source/);
    assert.throws(() => parseCatalog({ models: [{ ...base, pricing: undefined }] }, "/c.json"), /pricing is required/);
  });
});

/** A base layout with one 4-in, 6-out matrix (ggml order: ne = [in, out]). */
function layout(general: Record<string, string>, tensors: Array<[string, number[]]>): GgufLayout {
  return {
    version: 3,
    alignment: 32,
    metadataEnd: 0,
    fileTypeValueOffset: null,
    general,
    numbers: {},
    dataStart: 0,
    fileSize: 0,
    tensors: tensors.map(([name, dims]) => ({
      name,
      dims: dims.map(BigInt),
      type: 0,
      offset: 0,
      elements: dims.reduce((a, b) => a * b, 1),
    })),
  };
}

describe("PEFT to GGUF LoRA: names, shapes and refusals", () => {
  test("PEFT tensor names become llama.cpp's", () => {
    assert.deepEqual(loraTensorName("base_model.model.model.layers.12.self_attn.q_proj.lora_A.weight"), {
      base: "blk.12.attn_q.weight",
      side: "a",
      module: "attn_q",
    });
    assert.equal(loraTensorName("base_model.model.model.layers.0.mlp.down_proj.lora_B.weight").base, "blk.0.ffn_down.weight");
    assert.throws(() => loraTensorName("base_model.model.lm_head.lora_A.weight"), /adapts no layer/);
  });

  test("lora_B's rows are permuted per head as llama.cpp's Llama conversion permutes q and k", () => {
    // One head of 4 rows (two rotary pairs), one column: HF rows [h0, h1 | h2, h3] -> [h0, h2, h1, h3].
    assert.deepEqual([...permuteRows(Float32Array.from([0, 1, 2, 3]), 4, 1, 1)], [0, 2, 1, 3]);
    assert.deepEqual([...permuteRows(Float32Array.from([0, 1, 2, 3, 4, 5, 6, 7]), 8, 1, 2)], [0, 2, 1, 3, 4, 6, 5, 7]);
  });

  test("the base's name and shapes are checked: a mismatch is a clear error", () => {
    checkBaseName({ base_model_name_or_path: "HuggingFaceTB/SmolLM2-135M-Instruct" }, "HuggingFaceTB/SmolLM2-135M-Instruct");
    checkBaseName({ base_model_name_or_path: "/models/SmolLM2-135M-Instruct/" }, "HuggingFaceTB/SmolLM2-135M-Instruct");
    assert.throws(
      () => checkBaseName({ base_model_name_or_path: "Qwen/Qwen2.5-0.5B" }, "HuggingFaceTB/SmolLM2-135M-Instruct"),
      /trained on 'Qwen/,
    );
    const baseLayout = layout({ "general.architecture": "llama" }, [["blk.0.attn_q.weight", [4, 6]]]);
    const pair = (a: number[], b: number[]) => ({ base: "blk.0.attn_q.weight", a: { name: "A", shape: a }, b: { name: "B", shape: b } });
    checkLoraAgainstBase([pair([2, 4], [6, 2])], baseLayout, 2);
    assert.throws(
      () => checkLoraAgainstBase([pair([2, 5], [6, 2])], baseLayout),
      /maps 5 inputs to 6 outputs, the base model's matrix 4 to 6/,
    );
    assert.throws(() => checkLoraAgainstBase([pair([2, 4], [6, 3])], baseLayout), /rank 2 but lora_B has rank 3/);
    assert.throws(() => checkLoraAgainstBase([{ ...pair([2, 4], [6, 2]), base: "blk.9.attn_q.weight" }], baseLayout), /does not have/);
    assert.throws(() => checkLoraAgainstBase([{ base: "blk.0.attn_q.weight", a: { name: "A", shape: [2, 4] } }], baseLayout), /not lora_B/);
  });

  test("a GGUF given as an adapter must be a LoRA of the base's architecture", () => {
    const baseLayout = layout({ "general.architecture": "llama" }, [["blk.0.attn_q.weight", [4, 6]]]);
    const lora = (general: Record<string, string>) =>
      layout(general, [
        ["blk.0.attn_q.weight.lora_a", [4, 2]],
        ["blk.0.attn_q.weight.lora_b", [2, 6]],
      ]);
    checkGgufLora(lora({ "general.architecture": "llama", "general.type": "adapter", "adapter.type": "lora" }), baseLayout);
    assert.throws(
      () => checkGgufLora(lora({ "general.architecture": "llama", "general.type": "model" }), baseLayout),
      /not a LoRA adapter/,
    );
    assert.throws(
      () => checkGgufLora(lora({ "general.architecture": "qwen2", "general.type": "adapter", "adapter.type": "lora" }), baseLayout),
      /qwen2 architecture, the base model is llama/,
    );
  });

  test("what a plain LoRA cannot express is refused; rsLoRA's scale is kept", () => {
    assert.equal(loraAlpha({ r: 8, lora_alpha: 16 }), 16);
    assert.equal(loraAlpha({ r: 16, lora_alpha: 8, use_rslora: true }), 32);
    assert.throws(() => loraAlpha({ r: 8, lora_alpha: 16, use_dora: true }), /DoRA/);
    assert.throws(() => loraAlpha({ r: 8, lora_alpha: 16, bias: "all" }), /bias/);
    assert.throws(() => loraAlpha({ peft_type: "IA3", r: 8, lora_alpha: 16 }), /not LORA/);
  });
});
