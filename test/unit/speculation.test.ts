import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { StepCostModel } from "../../src/engine/core/cost-model.js";
import { Drafter } from "../../src/engine/core/drafter.js";
import { planDrafts } from "../../src/engine/core/draft-budget.js";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { ShardScheduler } from "../../src/engine/core/scheduler.js";
import { DRAFT_TOKENS_PER_STEP, MAX_DRAFT_PER_REQUEST, RequestSpeculation, ShardSpeculation } from "../../src/engine/core/speculation.js";
import type { StepPlan } from "../../src/engine/core/step-plan.js";
import type { StepReply } from "../../src/engine/runner/step-protocol.js";
import type { GenerationRequest } from "../../src/engine/types.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";
import type { ServiceTier } from "../../src/protocol/tiers.js";
import { GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";

// Speculative decoding's bookkeeping on its own: the drafter's guesses, the cost model's draft
// lengths, and the scheduler taking a verified run. The runner is played by a "model" that always
// writes a fixed text: the step verifies a draft the way the real runner does (sample at each
// position while the sample equals the draft). Exactness against the real model is tested in
// test/integration/speculation.test.ts.
const EOS = 0;
const texts = {
  pieceBytes: (token: number) => (token === EOS ? new Uint8Array() : new Uint8Array([token])),
  tokenText: (token: number) => String.fromCharCode(token),
  isEndOfGeneration: (token: number) => token === EOS,
};
/** One token per (ASCII) character: its code. */
const tokensOf = (text: string) => [...text].map((c) => c.charCodeAt(0));
const textOf = (tokens: readonly number[]) => String.fromCharCode(...tokens);

function request(prompt: string, extra: Partial<GenerationRequest> = {}, tier: ServiceTier = "default"): EngineRequest {
  return new EngineRequest(
    { promptTokens: tokensOf(prompt), maxTokens: 1000, sampling: { temperature: 0, topP: 1 }, stop: [], tier, ...extra },
    SAMPLER,
  );
}

/** Plays the runner for a model that writes `script` after any prompt, then EOS; returns the plan. */
function verifyStep(s: ShardScheduler, script: readonly number[]): StepPlan {
  const plan = s.schedule();
  const tokens: number[] = [];
  const counts: number[] = [];
  for (const r of plan.sampled) {
    const draft = plan.drafts.get(r)?.tokens ?? [];
    const written = r.generatedCount;
    let accepted = 0;
    for (;;) {
      const token = script[written + accepted] ?? EOS;
      tokens.push(token);
      if (accepted >= draft.length || draft[accepted] !== token) break;
      accepted++;
    }
    counts.push(accepted + 1);
  }
  const reply: StepReply = {
    type: "step",
    tokens: Int32Array.from(tokens),
    counts: Uint8Array.from(counts),
    logprobs: tokens.map(() => null),
    failedSamplers: [],
    failedRestores: [],
    setupMs: 0,
    decodeMs: 0,
    sampleMs: 0,
  };
  s.update(plan, reply);
  return plan;
}

async function drain(r: EngineRequest): Promise<GenerationEvent[]> {
  const out: GenerationEvent[] = [];
  for await (const event of r.events.drain()) out.push(event);
  return out;
}

/** A step's fixed cost dominates (one pass over the weights), as for a small batch on a CPU. */
const weightBound = () => new StepCostModel({ prior: [20, 1, 1, 0] });

function scheduler(cost: StepCostModel, mode: "auto" | "off" = "auto", sequences = 4) {
  return new ShardScheduler(
    { sequences, cellsPerSequence: 4096, stepTokens: 256, prefixCache: false, stallTimeoutMs: 60_000, speculation: mode },
    tieredPolicy,
    texts,
    cost,
  );
}

describe("the drafter", () => {
  test("drafts the prediction from its start, and resynchronises after an edit in the middle", () => {
    const prompt = tokensOf("rewrite");
    const context = [...prompt];
    const prediction = tokensOf("the quick brown fox jumps over the lazy dog");
    const drafter = new Drafter(context, prompt.length, prediction);
    assert.equal(textOf(drafter.proposals(9)[0]!.tokens), "the quick");
    // The output follows the prediction, then departs from it ("red" for "brown").
    context.push(...tokensOf("the quick red fox jumps"));
    drafter.advance(prompt.length);
    const draft = drafter.proposals(10)[0]!;
    assert.equal(draft.source, "prediction");
    assert.equal(textOf(draft.tokens), " over the ", "the rest of the prediction, after the edit");
  });

  test("without a prediction, looks the last tokens up in the prompt and the output", () => {
    const prompt = tokensOf("say: hello world again");
    const context = [...prompt, ...tokensOf("hel")];
    const drafter = new Drafter(context, prompt.length);
    const draft = drafter.proposals(6)[1]!;
    assert.equal(draft.source, "lookup");
    assert.equal(textOf(draft.tokens), "lo wor");
    assert.equal(new Drafter([...tokensOf("abcdef")], 6).proposals(4).find(Boolean), undefined, "no earlier occurrence: no guess");
  });

  test("a long match is a quote, looked up first: the place it quotes, not the last place its last tokens occurred", () => {
    // "the end" occurs twice in the prompt; the output has quoted the first sentence for 14 tokens.
    const prompt = tokensOf("quote: the start and the end. then the end again.");
    const context = [...prompt, ...tokensOf("the start and the en")];
    const draft = new Drafter(context, prompt.length).proposals(6)[1]!;
    assert.equal(draft.source, "quote", "a match of 12 tokens or more is a quote, with its own acceptance");
    assert.equal(textOf(draft.tokens), "d. the");
    // A short match is lookup, at the most recent place: "the en" → "d again".
    const short = [...prompt, ...tokensOf(" and the en")];
    const guess = new Drafter(short, prompt.length).proposals(6)[1]!;
    assert.equal(guess.source, "lookup");
    assert.equal(textOf(guess.tokens), "d agai");
  });

  test("a quote of the output's own loop goes on round the loop: the draft is as long as asked, not one period", () => {
    const prompt = tokensOf("repeat:");
    // The output loops with a period of 6 ("ab cd "), long enough for a 12-token match.
    const context = [...prompt, ...tokensOf("ab cd ab cd ab cd ab cd ab")];
    const draft = new Drafter(context, prompt.length).proposals(20)[1]!;
    assert.equal(draft.source, "quote");
    assert.equal(textOf(draft.tokens), " cd ab cd ab cd ab c");
    // A short match (lookup) stops at the context's end, as before: 3 tokens are weak evidence of a loop.
    const short = new Drafter([...prompt, ...tokensOf("xyz xyz")], prompt.length).proposals(20)[1]!;
    assert.equal(short.source, "lookup");
    assert.equal(textOf(short.tokens), " xyz");
  });
});

describe("draft lengths", () => {
  /** Streams decoding; with a prediction, one that has been accepted whole so far. */
  const decoding = (count: number, prediction?: string, tier: ServiceTier = "default") =>
    Array.from({ length: count }, () => {
      const r = request("prompt", prediction ? { prediction: tokensOf(prediction) } : {}, tier);
      r.speculation = new RequestSpeculation(r.tokens, r.promptLength, r.spec.prediction, new ShardSpeculation("auto"));
      // Past the first output token (its step carries no draft): the prediction's first, or a space.
      r.tokens.push(tokensOf(prediction ?? " ")[0]!);
      r.computed = r.tokens.length - 1;
      for (let i = 0; prediction && i < 10; i++) r.speculation.settle({ source: "prediction", tokens: tokensOf("abcdefghijklmnop") }, 16);
      return r;
    });
  const limits = { tokensLeft: 256, cellsPerSequence: 4096, itlMs: () => Infinity, lowerMs: Infinity };
  const base = (n: number) => ({ decodeTokens: n, promptTokens: 0, attended: 0 });

  test("a lone stream with a good prediction drafts long where a pass over the weights costs most", () => {
    const [r] = decoding(1, "abcdefghijklmnopqrstuvwxyz");
    const drafts = planDrafts([r!], base(1), limits, weightBound());
    assert.equal(drafts.get(r!)?.tokens.length, 25, "the rest of the prediction");
    // A source accepted 80% of the time: each token must bring the step's average rate, so the draft stops sooner.
    const [unsure] = decoding(1);
    unsure!.tokens.push(...tokensOf("promp"));
    const guess = planDrafts([unsure!], base(1), limits, weightBound()).get(unsure!);
    assert.equal(guess?.source, "lookup");
    assert.ok(guess.tokens.length < MAX_DRAFT_PER_REQUEST);
  });

  test("the step that samples a request's first token carries no draft: time to first token is not traded for later tokens", () => {
    const r = request("prompt", { prediction: tokensOf("abcdefghijklmnop") });
    r.computed = r.tokens.length - 1;
    r.speculation = new RequestSpeculation(r.tokens, r.promptLength, r.spec.prediction, new ShardSpeculation("auto"));
    assert.equal(planDrafts([r], base(1), limits, weightBound()).size, 0);
  });

  test("a draft nearly sure to be accepted grows long where a draft token costs a third of the step's pass over the weights", () => {
    const [r] = decoding(1, "abcdefghijklmnopqrstuvwxyz".repeat(3));
    for (let i = 0; i < 10; i++) r!.speculation!.settle({ source: "prediction", tokens: tokensOf("abcdefghijklmnop") }, 16);
    // One decode 60 ms, each draft token 20 ms more (Qwen2.5-Coder on 2 AVX2 cores: 44 and ~15).
    const draft = planDrafts([r!], base(1), limits, new StepCostModel({ prior: [20, 40, 5, 0, 20] })).get(r!)!;
    assert.ok(draft.tokens.length > 20, `${draft.tokens.length} draft tokens`);
  });

  test("a nearly sure draft granted most of a tile goes on to a whole one: 64 rows cost less than 56-63 on llama.cpp's CPU kernels", () => {
    const cost = new StepCostModel({ prior: [10, 1, 1, 3, 6] });
    const at = (r: EngineRequest) => ({ decodeTokens: 1, promptTokens: 0, attended: r.computed + 1 });
    const stream = (acceptance: number) => {
      const r = request("p".repeat(1000), { prediction: tokensOf("abcdefghijklmnopqrstuvwxyz".repeat(4)) });
      // The shard's measured acceptance is where each request's own estimate starts.
      const shard = new ShardSpeculation("auto");
      shard.rates.prediction = acceptance;
      r.speculation = new RequestSpeculation(r.tokens, r.promptLength, r.spec.prediction, shard);
      r.tokens.push(tokensOf("a")[0]!);
      r.computed = r.tokens.length - 1;
      return r;
    };
    const sure = stream(0.9999);
    const tokenByToken = planDrafts([sure], at(sure), limits, cost);
    assert.equal(tokenByToken.get(sure)?.tokens.length, 64, "token by token about 50 tokens: on to the tile");
    // A draft that stops well short of the tile stays as it is.
    const unsure = stream(0.95);
    const short = planDrafts([unsure], at(unsure), limits, cost).get(unsure)!;
    assert.ok(short.tokens.length < 48, `${short.tokens.length} draft tokens`);
    // The pace still holds: where the whole tile would overstep it, the draft stays where it was.
    const paced = planDrafts([sure], at(sure), { ...limits, itlMs: () => 150 }, cost).get(sure);
    assert.ok((paced?.tokens.length ?? 0) < 64, `${paced?.tokens.length} draft tokens within a 150 ms pace`);
  });

  test("on a saturated machine (per-token cost dominant), unsure drafts do not get in", () => {
    const streams = decoding(16, "abcdefghijklmnop");
    for (const r of streams) for (let i = 0; i < 20; i++) r.speculation!.settle({ source: "prediction", tokens: tokensOf("ab") }, 0);
    const drafts = planDrafts(streams, base(16), limits, new StepCostModel({ prior: [2, 5, 5, 0] }));
    assert.equal(drafts.size, 0);
  });

  test("priority drafts first, draft tokens stay within the step's cap and its time budget", () => {
    const standard = decoding(4, "abcdefghijklmnopqrstuvwxyz");
    const [priority] = decoding(1, "abcdefghijklmnopqrstuvwxyz", "priority");
    const all = [...standard, priority!];
    const capped = planDrafts(all, base(5), limits, weightBound());
    assert.equal(capped.get(priority!)?.tokens.length, 25, "the rest of the prediction");
    assert.ok([...capped.values()].reduce((n, d) => n + d.tokens.length, 0) <= DRAFT_TOKENS_PER_STEP);
    const one = planDrafts(all, base(5), { ...limits, tokensLeft: 1 }, weightBound());
    assert.deepEqual([...one.keys()], [priority], "the step's last draft token goes to priority");
    const cost = weightBound();
    const target = cost.predict(base(5)) + 3;
    const paced = planDrafts(all, base(5), { ...limits, itlMs: () => target }, cost);
    const lengths = all.map((r) => paced.get(r)?.tokens.length ?? 0);
    assert.ok(
      lengths.every((n) => n <= lengths[4]!),
      `priority drafts at least as much as any other stream: ${lengths}`,
    );
    const step = cost.predict({ ...base(5), draftTokens: lengths.reduce((a, b) => a + b, 0) });
    assert.ok(
      lengths.every((n) => step <= target * (1 + n)),
      "every stream keeps its pace: the step within its target times the tokens it may bring",
    );
  });

  test("a step may take a few inter-token targets where the draft is expected to bring that many tokens, never beside a stream without one", () => {
    const cost = weightBound();
    const target = cost.predict(base(1)) + 4;
    const [alone] = decoding(1, "abcdefghijklmnopqrstuvwxyz");
    const long = planDrafts([alone!], base(1), { ...limits, itlMs: () => target }, cost).get(alone!)!;
    assert.ok(long.tokens.length > 4, `${long.tokens.length} draft tokens: the stream's pace, not the step, is held to the target`);
    assert.ok(cost.predict({ ...base(1), draftTokens: long.tokens.length }) <= 3 * target, "at most three targets a step");
    const [plain] = decoding(1);
    const beside = planDrafts([alone!, plain!], base(2), { ...limits, itlMs: () => target }, cost).get(alone!)!;
    assert.equal(beside.tokens.length, target - cost.predict(base(2)), "a stream with nothing to draft keeps the step within its target");
  });

  test("a request's acceptance is its acceptance now: a long matching stretch after an edit brings it back up", () => {
    const speculation = new RequestSpeculation(tokensOf("x"), 1, tokensOf("abc"), new ShardSpeculation("auto"));
    speculation.settle({ source: "prediction", tokens: tokensOf("abcd") }, 1);
    const afterEdit = speculation.acceptance("prediction");
    for (let i = 0; i < 8; i++) speculation.settle({ source: "prediction", tokens: tokensOf("abcdefghijklmnop") }, 16);
    assert.ok(
      afterEdit < 0.8 && speculation.acceptance("prediction") > 0.97,
      `${afterEdit} after the edit, ${speculation.acceptance("prediction")} after 128 tokens accepted`,
    );
  });

  test("each step drafts from the source expected to bring more tokens, so a prediction that fell behind is taken up again", () => {
    // Lookup has done better lately than the prediction.
    const { context, speculation } = afterLookupWins("copy:", " five six seven eight nine ten", 22);
    assert.ok(speculation.acceptance("lookup") > speculation.acceptance("prediction"));
    // The output repeats itself: lookup guesses " five" again (5 tokens); the prediction, resynchronised, has 25.
    context.push(...tokensOf(" five five"));
    const draft = speculation.propose(context, 64)!;
    assert.equal(draft.source, "prediction", "the prediction's long guess is worth more than lookup's short one");
    assert.equal(textOf(draft.tokens), " six seven eight nine ten");
  });

  test("where the output loops and leaves the prediction at every turn, the quote that goes on round the loop takes over", () => {
    const documentText = "one two three four five six seven eight nine ten eleven twelve";
    const context = tokensOf(`doc: ${documentText}\n`);
    const speculation = new RequestSpeculation(context, context.length, tokensOf(documentText), new ShardSpeculation("auto"));
    // The model repeats the document's first five words for good; the prediction, resynchronised
    // on each turn, agrees with the loop up to "six".
    const loop = tokensOf("one two three four five ");
    const promptLength = context.length;
    const truth = (at: number) => loop[(at - promptLength) % loop.length]!;
    const drafted: Array<{ source: string; accepted: number }> = [];
    for (let step = 0; step < 40; step++) {
      const draft = speculation.propose(context, 64);
      let accepted = 0;
      while (draft && accepted < draft.tokens.length && draft.tokens[accepted] === truth(context.length + accepted)) accepted++;
      if (draft) {
        speculation.settle(draft, accepted);
        drafted.push({ source: draft.source, accepted });
      }
      for (let i = 0; i <= accepted; i++) context.push(truth(context.length));
    }
    const last = drafted.slice(-5);
    assert.ok(
      last.every((d) => d.source === "quote" && d.accepted === 64),
      `the last drafts come from the loop's quote, accepted whole: ${JSON.stringify(last)}`,
    );
    assert.ok(
      drafted.some((d) => d.source === "prediction"),
      "the prediction was drafted while it was the better bet",
    );
  });

  test("where both sources guess the same as far as both go, the prediction's guess is drafted", () => {
    const { context, speculation } = afterLookupWins("copy: alpha beta gamma", " alpha beta gamma", 5);
    context.push(...tokensOf(" alp"));
    const draft = speculation.propose(context, 64)!;
    assert.equal(draft.source, "prediction");
    assert.equal(textOf(draft.tokens), "ha beta gamma");
  });
});

/** A request's speculation after `lookupHits` lookup drafts accepted whole and one prediction draft rejected at once. */
function afterLookupWins(prompt: string, prediction: string, lookupHits: number) {
  const context = tokensOf(prompt);
  const speculation = new RequestSpeculation(context, context.length, tokensOf(prediction), new ShardSpeculation("auto"));
  for (let i = 0; i < lookupHits; i++) speculation.settle({ source: "lookup", tokens: tokensOf("ab") }, 2);
  speculation.settle({ source: "prediction", tokens: tokensOf("abc") }, 0);
  return { context, speculation };
}

describe("a verified run in the scheduler", () => {
  test("accepted drafts become output in one step; the output is what the model writes, prediction or not", async () => {
    const script = tokensOf("the cat sat on the mat");
    const outputs: string[] = [];
    for (const prediction of [undefined, "the cat sat in the hat"]) {
      const s = scheduler(weightBound());
      const r = request("copy", { ...(prediction ? { prediction: tokensOf(prediction) } : {}), maxTokens: 100 });
      s.enqueue(r);
      let steps = 0;
      while (r.status !== "finished" && steps++ < 100) verifyStep(s, script);
      const events = await drain(r);
      outputs.push(events.map((e) => (e.type === "text" ? e.text : "")).join(""));
      const finish = events.at(-1) as Extract<GenerationEvent, { type: "finish" }>;
      assert.equal(finish.completionTokens, script.length);
      if (prediction) {
        assert.ok(steps < script.length / 2, `${steps} steps for ${script.length} tokens`);
        // "the cat sat " and, resynchronised after " th", "e ": the first "t" is the prompt step's sample.
        assert.equal(finish.prediction!.accepted, 13);
        assert.ok(finish.prediction!.rejected >= 5, '"in th" at least was drafted and rejected');
        assert.ok(finish.speculation!.draftTokens >= finish.prediction!.accepted + finish.prediction!.rejected);
      } else assert.equal(finish.prediction, undefined);
    }
    assert.deepEqual(outputs, ["the cat sat on the mat", "the cat sat on the mat"]);
  });

  test("max_tokens and stop strings end a run where they occur; the cells after it are removed", async () => {
    const script = tokensOf("abcdefghij");
    const s = scheduler(weightBound());
    const r = request("go", { prediction: script, maxTokens: 4 });
    s.enqueue(r);
    const plan = verifyStep(s, script);
    assert.equal(plan.drafts.get(r)?.tokens.length, undefined, "the prompt's step samples the first token only");
    const second = verifyStep(s, script);
    assert.equal(second.drafts.get(r)?.tokens.length, 2, "a draft never reaches past max_tokens");
    assert.equal(r.status, "finished");
    assert.equal(textOf(r.tokens.slice(r.promptLength)), "abcd");

    const t = scheduler(weightBound());
    const stopped = request("go", { prediction: script, stop: ["d"] });
    t.enqueue(stopped);
    verifyStep(t, script);
    const drafted = verifyStep(t, script).drafts.get(stopped)!.tokens.length;
    const events = await drain(stopped);
    assert.equal(events.map((e) => (e.type === "text" ? e.text : "")).join(""), "abc");
    const finish = events.at(-1) as Extract<GenerationEvent, { type: "finish" }>;
    assert.equal(finish.reason, "stop");
    // "bcdefgh…" drafted and accepted whole; the output ended at "d": b, c and d were output. The
    // draft tokens after the stop were right: cut by the stop, they are neither accepted nor rejected.
    assert.ok(drafted > 3);
    assert.deepEqual(finish.prediction, { accepted: 3, rejected: 0 });
    for (const event of events)
      if ((event.type === "text" || event.type === "finish") && event.prediction)
        assert.ok(
          event.prediction.accepted <= event.completionTokens,
          `accepted ${event.prediction.accepted} > output ${event.completionTokens}`,
        );
    const next = t.schedule();
    assert.ok(
      next.ops.some((op) => op.op === "rm" && op.from === stopped.computed),
      "the accepted cells past the stop are removed",
    );
  });

  test("off: no request drafts, prediction or not", () => {
    const s = scheduler(weightBound(), "off");
    const r = request("go", { prediction: tokensOf("abcdefgh") });
    s.enqueue(r);
    verifyStep(s, tokensOf("abcdefgh"));
    const plan = verifyStep(s, tokensOf("abcdefgh"));
    assert.equal(plan.drafts.size, 0);
    assert.equal(r.speculation, undefined);
  });
});
