import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { AdapterTurns, MAX_PASSED_STEPS, TURN_STEPS } from "../../src/engine/core/adapter-turns.js";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { StepCostModel } from "../../src/engine/core/cost-model.js";
import { ShardScheduler } from "../../src/engine/core/scheduler.js";
import { chooseShard } from "../../src/engine/core/placement.js";
import { SequenceCap } from "../../src/engine/core/sequence-cap.js";
import { separatingMoves } from "../../src/engine/core/adapter-moves.js";
import { cacheNamespaceOf } from "../../src/engine/shard-router.js";
import { step, GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";
import { parseCatalog, resolveAdapters } from "../../src/catalog/load.js";
import { checkBaseName, loraAlpha, loraTensorName, permuteRows } from "../../src/catalog/convert/peft-lora.js";
import { checkGgufLora, checkLoraAgainstBase } from "../../src/catalog/convert/lora-checks.js";
import type { GgufLayout } from "../../src/catalog/gguf/layout.js";
import type { ServiceTier } from "../../src/protocol/tiers.js";

const texts = { pieceBytes: () => new Uint8Array([97]), tokenText: () => "a", isEndOfGeneration: () => false };

function request(
  adapter: string | undefined,
  tier: ServiceTier = "default",
  maxTokens = 100,
  cacheNamespace?: string,
  sampling: { temperature: number; seed?: number } = { temperature: 0 },
): EngineRequest {
  const spec = { promptTokens: [1, 2, 3], maxTokens, sampling: { topP: 1, ...sampling }, stop: [], tier, cacheNamespace };
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

describe("shards with room keep each adapter's requests apart, under the model's cap", () => {
  /** Two shards of `perShard` sequences each, the model capped at `cap` running requests. */
  function twoShards(perShard: number, cap: number) {
    const shards: Array<{ scheduler: ShardScheduler; woken: number; wake(): void }> = [];
    const sequenceCap = new SequenceCap(cap, () => shards);
    for (let i = 0; i < 2; i++) {
      const scheduler = new ShardScheduler(
        { shard: i, sequences: perShard, share: cap / 2, cellsPerSequence: 256, stepTokens: 64, prefixCache: true, stallTimeoutMs: 60_000 },
        tieredPolicy,
        texts,
        new StepCostModel({ prior: [0, 0, 0, 0] }),
        () => undefined,
        sequenceCap,
      );
      shards.push({
        scheduler,
        woken: 0,
        wake() {
          this.woken++;
        },
      });
    }
    return shards;
  }
  const keysOf = (list: readonly EngineRequest[]) => new Set(list.map((r) => r.adapter?.key ?? ""));

  test("requests arriving mixed go to shards of their own adapter, however uneven the mix", () => {
    const shards = twoShards(8, 8);
    for (const key of [undefined, "a", "a", undefined, undefined, undefined, "a", undefined]) {
      const r = request(key);
      chooseShard(shards, r).scheduler.enqueue(r);
    }
    shards.forEach(({ scheduler }) => step(scheduler));
    const [first, second] = shards.map(({ scheduler }) => scheduler.running);
    assert.deepEqual([first!.length, second!.length], [5, 3], "the base's five on one shard, the adapter's three on the other");
    assert.deepEqual([keysOf(first!), keysOf(second!)], [new Set([""]), new Set(["a"])]);
  });

  test("base requests alone still spread evenly, and a cached prefix draws them only up to the shard's share", () => {
    const shards = twoShards(8, 8);
    for (let i = 0; i < 8; i++) {
      const r = request(undefined);
      chooseShard(shards, r).scheduler.enqueue(r);
    }
    assert.deepEqual(
      shards.map(({ scheduler }) => scheduler.waiting.length),
      [4, 4],
    );
    const cached = twoShards(8, 8);
    const first = request(undefined, "default", 1, "acct");
    cached[1]!.scheduler.enqueue(first);
    step(cached[1]!.scheduler);
    assert.equal(first.status, "finished");
    const next = Array.from({ length: 8 }, () => request(undefined, "default", 1, "acct"));
    for (const r of next) chooseShard(cached, r).scheduler.enqueue(r);
    assert.ok(cached[1]!.scheduler.cachedPrefix(next[0]!) > 0, "the second shard holds the prompt");
    assert.deepEqual(
      cached.map(({ scheduler }) => scheduler.waiting.length),
      [4, 4],
      "the prefix fills the share, not the room",
    );
  });

  test("the cap holds the model to its sequences, and a sequence given up on one shard admits a request waiting on another", () => {
    const shards = twoShards(4, 4);
    const [zero, one] = shards.map((s) => s.scheduler) as [ShardScheduler, ShardScheduler];
    const short = request(undefined, "default", 2);
    for (const r of [short, request(undefined), request(undefined)]) zero.enqueue(r);
    const [a1, a2] = [request("a"), request("a")];
    one.enqueue(a1);
    one.enqueue(a2);
    step(zero);
    step(one);
    assert.deepEqual([zero.running.length, one.running.length, one.waiting.length], [3, 1, 1], "four running in all; one waits");
    assert.equal(one.freeSequences, 0, "its own sequences are free, the model's are not");
    const woken = shards[1]!.woken;
    step(zero); // the short request ends
    assert.equal(short.status, "finished");
    assert.ok(shards[1]!.woken > woken, "the shard with a request waiting was woken");
    step(one);
    assert.deepEqual([one.running.length, one.waiting.length], [2, 0]);
    assert.equal(a2.status, "running");
  });
});

describe("moves keep each adapter's requests on shards of their own", () => {
  const shardOf = (running: EngineRequest[], waiting: EngineRequest[] = [], sequenceCount = 8) => ({
    scheduler: { running, waiting, sequenceCount },
  });
  const running = (r: EngineRequest) => {
    r.status = "running";
    r.started = true;
    return r;
  };

  test("groups on a mixed shard move whole, the smallest first, to a shard holding only their own or nothing", () => {
    const [b1, b2] = [running(request(undefined)), running(request(undefined))];
    const a = request("a");
    const empty = shardOf([]);
    assert.deepEqual(
      separatingMoves([shardOf([b1, b2], [a]), empty]).map((m) => [m.request, m.to]),
      [[a, empty]],
      "the waiting adapter request goes; the base's two stay",
    );
    const baseOnly = shardOf([running(request(undefined))]);
    assert.deepEqual(
      separatingMoves([shardOf([b1, b2], [a]), baseOnly]).map((m) => [m.request, m.to]),
      [
        [b1, baseOnly],
        [b2, baseOnly],
      ],
      "the adapter's request has nowhere to go: the base's move to their own",
    );
    assert.deepEqual(
      separatingMoves([shardOf([b1, b2], [a]), shardOf([running(request("c"))])]),
      [],
      "another adapter holds the other shard",
    );
    assert.deepEqual(separatingMoves([shardOf([b1, b2], [a]), shardOf([running(request(undefined))], [], 2)]), [], "no room there");
  });

  test("a priority request, a seeded sampled one, or one that moved before does not move, and its group stays", () => {
    const bases = () => [running(request(undefined)), running(request(undefined)), running(request(undefined))];
    const adapterOnly = shardOf([running(request("a"))]);
    for (const stuck of [
      running(request("a", "priority")),
      running(request("a", "default", 100, undefined, { seed: 7, temperature: 1 })),
    ]) {
      assert.deepEqual(separatingMoves([shardOf([stuck, ...bases()]), adapterOnly]), []);
    }
    const movedOnce = running(request("a"));
    movedOnce.moved = true;
    assert.deepEqual(separatingMoves([shardOf([movedOnce, ...bases()]), adapterOnly]), [], "nor one that moved before");
    const free = running(request("a", "default", 100, undefined, { temperature: 1 }));
    assert.equal(separatingMoves([shardOf([free, ...bases()]), adapterOnly]).length, 1, "an unseeded sampled one does");
  });

  test("a moved request's new sampler goes on from what it generated, on a seed of its own", () => {
    const [from, to] = [0, 1].map(
      (shard) =>
        new ShardScheduler(
          { shard, sequences: 4, cellsPerSequence: 256, stepTokens: 64, prefixCache: true, stallTimeoutMs: 60_000 },
          tieredPolicy,
          texts,
          new StepCostModel({ prior: [0, 0, 0, 0] }),
        ),
    ) as [ShardScheduler, ShardScheduler];
    const moving = request(undefined, "default", 5);
    from.enqueue(moving);
    step(from, 7);
    step(from, 8);
    assert.deepEqual(moving.tokens.slice(moving.promptLength), [7, 8]);
    moving.moveTo = (output) => {
      to.takeOver(moving, output);
      return true;
    };
    const left = step(from);
    assert.equal(left.movedAway, 1);
    assert.ok(moving.moved);
    assert.deepEqual(left.freeSamplers, [moving.id], "its sampler on the old shard is freed");
    assert.equal(from.running.length, 0);
    const arrived = step(to, 9);
    assert.equal(arrived.newSamplers.length, 1);
    const built = arrived.newSamplers[0]!;
    assert.deepEqual(built.history, [7, 8]);
    assert.notEqual(built.spec.seed, moving.sampler.seed);
    assert.equal(arrived.scheduled[0]!.count, moving.promptLength + 2, "it computes its prompt and its tokens again");
    assert.equal(moving.shard, 1);
    while (moving.status !== "finished") step(to, 9);
    assert.deepEqual(moving.tokens.slice(moving.promptLength), [7, 8, 9, 9, 9], "and ends on the new shard with every token");
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
