import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { ModelPricing } from "../../src/catalog/types.js";
import { addMoney, compareMoney, requestCost, roundMoney } from "../../src/billing/cost.js";
import { ExactDecimal, stringifyJson } from "../../src/protocol/money-json.js";
import { effectivePrices, resolveTier, supportedTiers } from "../../src/billing/prices.js";
import { pricingView } from "../../src/billing/pricing-view.js";

const discounted: ModelPricing = {
  input: "0.44",
  output: "1.32",
  cached_input: "0.14",
  discount_percent: "51",
  tiers: { priority: "1.5", flex: "0.8" },
};

const undiscounted: ModelPricing = {
  input: "0.23",
  output: "2.30",
  cached_input: "0.20",
  tiers: { priority: "1.5", flex: "0.8" },
};

const standardOnly: ModelPricing = { input: "0.02", output: "0.06", cached_input: "0.01", discount_percent: "0" };
const flexOnly: ModelPricing = { input: "1", output: "2", cached_input: "0.5", tiers: { flex: "0.5" } };

function rounded(p: { input: string; output: string; cached_input: string }, decimals: number) {
  return {
    input: roundMoney(p.input, decimals),
    output: roundMoney(p.output, decimals),
    cached_input: roundMoney(p.cached_input, decimals),
  };
}

describe("effectivePrices: the spec's table", () => {
  it("0.44 / 1.32 / 0.14 at 51% off, standard: exactly 0.2156 / 0.6468 / 0.0686", () => {
    const p = effectivePrices(discounted, "default");
    assert.deepEqual(p, { input: "0.2156", output: "0.6468", cached_input: "0.0686" });
    assert.deepEqual(rounded(p, 3), { input: "0.216", output: "0.647", cached_input: "0.069" });
  });

  it("priority (×1.5): exactly 0.3234 / 0.9702 / 0.1029", () => {
    const p = effectivePrices(discounted, "priority");
    assert.deepEqual(p, { input: "0.3234", output: "0.9702", cached_input: "0.1029" });
    assert.deepEqual(rounded(p, 4), { input: "0.3234", output: "0.9702", cached_input: "0.1029" });
  });

  it("flex (×0.8): exactly 0.17248 / 0.51744 / 0.05488, 0.1725 / 0.5174 / 0.0549 at 4 decimals", () => {
    const p = effectivePrices(discounted, "flex");
    assert.deepEqual(p, { input: "0.17248", output: "0.51744", cached_input: "0.05488" });
    assert.deepEqual(rounded(p, 4), { input: "0.1725", output: "0.5174", cached_input: "0.0549" });
  });

  it("0.23 / 2.30 / 0.20 without discount: standard, priority 0.345 / 3.45 / 0.30, flex 0.184 / 1.84 / 0.16", () => {
    assert.deepEqual(effectivePrices(undiscounted, "default"), { input: "0.23", output: "2.3", cached_input: "0.2" });
    assert.deepEqual(effectivePrices(undiscounted, "priority"), { input: "0.345", output: "3.45", cached_input: "0.3" });
    assert.equal(compareMoney(effectivePrices(undiscounted, "priority").cached_input, "0.30"), 0);
    assert.deepEqual(effectivePrices(undiscounted, "flex"), { input: "0.184", output: "1.84", cached_input: "0.16" });
  });

  it("100% off is free; absent discount is none", () => {
    const free = effectivePrices({ ...discounted, discount_percent: "100" }, "priority");
    assert.deepEqual(free, { input: "0", output: "0", cached_input: "0" });
    assert.deepEqual(effectivePrices(flexOnly, "default"), { input: "1", output: "2", cached_input: "0.5" });
  });

  it("no float artefacts where binary floats would show them (0.1 × 3 style)", () => {
    const p = effectivePrices({ input: "0.1", output: "0.7", cached_input: "0.3", tiers: { priority: "3" } }, "priority");
    assert.deepEqual(p, { input: "0.3", output: "2.1", cached_input: "0.9" });
    const tiny = effectivePrices({ input: "0.0000001", output: "1", cached_input: "0", discount_percent: "0.5" }, "default");
    assert.equal(tiny.input, "0.0000000995"); // never 9.95e-8
  });

  it("throws on an unsupported tier and on malformed pricing", () => {
    assert.throws(() => effectivePrices(standardOnly, "priority"), /not supported/);
    assert.throws(() => effectivePrices(flexOnly, "priority"), /not supported/);
    assert.throws(() => effectivePrices({ ...standardOnly, input: "1e-3" }, "default"), TypeError);
    assert.throws(() => effectivePrices({ ...standardOnly, input: "-1" }, "default"), TypeError);
    assert.throws(() => effectivePrices({ ...standardOnly, discount_percent: "101" }, "default"), RangeError);
    assert.throws(() => effectivePrices({ ...standardOnly, tiers: { priority: "abc" } }, "priority"), TypeError);
  });
});

describe("supportedTiers / resolveTier", () => {
  it("lists default always, then the tiers the model has", () => {
    assert.deepEqual(supportedTiers(discounted), ["default", "priority", "flex"]);
    assert.deepEqual(supportedTiers(standardOnly), ["default"]);
    assert.deepEqual(supportedTiers(flexOnly), ["default", "flex"]);
  });

  it("auto / absent / null / default → default", () => {
    for (const requested of ["auto", "default", undefined, null] as const) {
      assert.equal(resolveTier(discounted, requested), "default");
    }
  });

  it("a supported tier is kept, an unsupported one falls back to default", () => {
    assert.equal(resolveTier(discounted, "priority"), "priority");
    assert.equal(resolveTier(discounted, "flex"), "flex");
    assert.equal(resolveTier(standardOnly, "priority"), "default");
    assert.equal(resolveTier(standardOnly, "flex"), "default");
    assert.equal(resolveTier(flexOnly, "priority"), "default");
    assert.equal(resolveTier(flexOnly, "flex"), "flex");
  });

  it("OpenAI's scale and fast are the closest tier the model has: priority, else default", () => {
    for (const requested of ["scale", "fast"] as const) {
      assert.equal(resolveTier(discounted, requested), "priority");
      assert.equal(resolveTier(standardOnly, requested), "default");
      assert.equal(resolveTier(flexOnly, requested), "default");
    }
  });
});

describe("requestCost", () => {
  const standard = effectivePrices(discounted, "default"); // 0.2156 / 0.6468 / 0.0686

  it("1,000,000 prompt tokens at 0.2156 cost exactly 0.2156", () => {
    assert.equal(requestCost(standard, { promptTokens: 1_000_000, cachedPromptTokens: 0, completionTokens: 0 }), "0.2156");
  });

  it("37 prompt tokens (5 of them cached) + 11 completion tokens", () => {
    // (37 − 5) × 0.2156 = 6.8992; 5 × 0.0686 = 0.343; 11 × 0.6468 = 7.1148;
    // 6.8992 + 0.343 + 7.1148 = 14.357; ÷ 1,000,000 = 0.000014357
    assert.equal(requestCost(standard, { promptTokens: 37, cachedPromptTokens: 5, completionTokens: 11 }), "0.000014357");
  });

  it("20 prompt tokens → 0.000004312, in plain notation", () => {
    assert.equal(requestCost(standard, { promptTokens: 20, cachedPromptTokens: 0, completionTokens: 0 }), "0.000004312");
  });

  it("0 tokens → 0", () => {
    assert.equal(requestCost(standard, { promptTokens: 0, cachedPromptTokens: 0, completionTokens: 0 }), "0");
  });

  it("huge counts stay exact", () => {
    const n = Number.MAX_SAFE_INTEGER; // 9007199254740991
    // 9007199254740991 × 0.2156 = 1941952159322157.6596 → ÷ 1e6 (checked with Python's decimal)
    assert.equal(requestCost(standard, { promptTokens: n, cachedPromptTokens: 0, completionTokens: 0 }), "1941952159.3221576596");
    // + 9007199254740991 × 0.6468 = 5825856477966472.9788 → total 7767808637288630.6384 ÷ 1e6
    assert.equal(requestCost(standard, { promptTokens: n, cachedPromptTokens: 0, completionTokens: n }), "7767808637.2886306384");
  });

  it("rejects bad counts", () => {
    const bad = [
      { promptTokens: -1, cachedPromptTokens: 0, completionTokens: 0 },
      { promptTokens: 1.5, cachedPromptTokens: 0, completionTokens: 0 },
      { promptTokens: Number.NaN, cachedPromptTokens: 0, completionTokens: 0 },
      { promptTokens: 2 ** 53, cachedPromptTokens: 0, completionTokens: 0 },
      { promptTokens: 3, cachedPromptTokens: 4, completionTokens: 0 },
    ];
    for (const usage of bad) assert.throws(() => requestCost(standard, usage), RangeError);
  });
});

describe("money helpers", () => {
  it("addMoney is exact", () => {
    assert.equal(addMoney("0.1", "0.2"), "0.3");
    assert.equal(addMoney("0.000014357", "0.000004312"), "0.000018669");
    assert.equal(addMoney("-0.5", "0.5"), "0");
    assert.equal(addMoney("99999999999999999999.99", "0.01"), "100000000000000000000");
    assert.throws(() => addMoney("1e3", "1"), TypeError);
  });

  it("compareMoney", () => {
    assert.equal(compareMoney("0.30", "0.3"), 0);
    assert.equal(compareMoney("0.000000001", "0"), 1);
    assert.equal(compareMoney("-1", "0.5"), -1);
  });

  it("roundMoney rounds half-up and pads to the decimals", () => {
    assert.equal(roundMoney("0.0686", 3), "0.069");
    assert.equal(roundMoney("0.00005", 4), "0.0001");
    assert.equal(roundMoney("0.00004999", 4), "0.0000");
    assert.equal(roundMoney("0.3", 2), "0.30");
    assert.equal(roundMoney("2.5", 0), "3");
    assert.equal(roundMoney("-2.5", 0), "-3");
    assert.equal(roundMoney("-0.0001", 2), "0.00");
    assert.throws(() => roundMoney("1", -1), RangeError);
  });
});

describe("stringifyJson / ExactDecimal", () => {
  it("round-trips nested objects like JSON.stringify", () => {
    const value = { a: 1, b: [true, null, "x", { c: 'd"e\n' }], e: { f: { g: [] } }, h: undefined, d: new Date(0) };
    assert.equal(stringifyJson(value), JSON.stringify(value));
    assert.equal(stringifyJson(value, 2), JSON.stringify(value, null, 2));
    assert.deepEqual(JSON.parse(stringifyJson(value)), JSON.parse(JSON.stringify(value)));
  });

  it("writes ExactDecimal as a raw number without exponent", () => {
    const out = stringifyJson({ usage: { estimated_cost: new ExactDecimal("0.000004312"), total_tokens: 20 } });
    assert.equal(out, '{"usage":{"estimated_cost":0.000004312,"total_tokens":20}}');
    assert.equal(stringifyJson([new ExactDecimal("0"), new ExactDecimal("-12.5")]), "[0,-12.5]");
    assert.equal(stringifyJson(new ExactDecimal("0.1")), "0.1");
    assert.equal(stringifyJson({ x: [new ExactDecimal("1.5")] }, 2), '{\n  "x": [\n    1.5\n  ]\n}');
    // 30 significant digits survive verbatim, where a float would lose them
    const long = "0.123456789012345678901234567890";
    assert.equal(stringifyJson({ v: new ExactDecimal(long) }), `{"v":${long}}`);
  });

  it("JSON.parse of the output gives the nearest float", () => {
    const parsed = JSON.parse(stringifyJson({ c: new ExactDecimal("0.000004312"), d: new ExactDecimal("0.1") }));
    assert.equal(parsed.c, 0.000004312);
    assert.equal(parsed.d, 0.1);
    assert.equal(typeof parsed.c, "number");
  });

  it("user text that looks like a sentinel stays a string", () => {
    // Forged look-alikes with the wrong nonce (the real one is never printed; see the next test).
    const forged = ["~xd:00000000000000000000000000000000:0.5", "~xd:0.5", "0.5"];
    for (const s of forged) {
      const out = stringifyJson({ s, n: new ExactDecimal("1") });
      assert.deepEqual(JSON.parse(out), { s, n: 1 });
    }
  });

  it("even the real per-process marker in user text stays a string", () => {
    // Recover the real marker by serialising an ExactDecimal through a wrapping toJSON that exposes it.
    let marker = "";
    const spy = {
      toJSON() {
        return { v: new ExactDecimal("7") };
      },
    };
    const original = JSON.stringify;
    JSON.stringify = function (this: unknown, ...args: Parameters<typeof original>) {
      const raw = original.apply(this, args);
      const m = /"([^"]*:)7"/.exec(raw ?? "");
      if (m?.[1]) marker = m[1];
      return raw;
    } as typeof JSON.stringify;
    try {
      stringifyJson(spy);
    } finally {
      JSON.stringify = original;
    }
    assert.ok(marker.length > 10, "found the marker");
    const s = `${marker}0.25`;
    const value = { s, [`${marker}9`]: "key", n: new ExactDecimal("3") };
    const out = stringifyJson(value);
    assert.deepEqual(JSON.parse(out), { s, [`${marker}9`]: "key", n: 3 });
    assert.equal(stringifyJson({ s }), JSON.stringify({ s }));
  });

  it("plain JSON.stringify degrades ExactDecimal to an exact string", () => {
    assert.equal(JSON.stringify({ v: new ExactDecimal("0.5") }), '{"v":"0.5"}');
  });

  it("ExactDecimal validates its text; ExactDecimal.of normalises", () => {
    for (const bad of ["", "1e-6", "4.312E-6", ".5", "5.", "01", "+1", "NaN", "Infinity", " 1", "0x10", "1,5"]) {
      assert.throws(() => new ExactDecimal(bad), TypeError, bad);
    }
    assert.equal(ExactDecimal.of("2.30").text, "2.3");
    assert.equal(ExactDecimal.of("007").text, "7");
    assert.throws(() => ExactDecimal.of("1e3"), TypeError);
  });

  it("throws where JSON.stringify would return undefined", () => {
    assert.throws(() => stringifyJson(undefined), TypeError);
  });
});

describe("pricingView", () => {
  it("shows list, discount and per-tier exact prices as JSON numbers", () => {
    const out = stringifyJson(pricingView(discounted));
    assert.equal(
      out,
      '{"currency":"USD","unit":"per_1m_tokens",' +
        '"list":{"input":0.44,"output":1.32,"cached_input":0.14},"discount_percent":51,' +
        '"tiers":{"default":{"input":0.2156,"output":0.6468,"cached_input":0.0686},' +
        '"priority":{"input":0.3234,"output":0.9702,"cached_input":0.1029,"multiplier":1.5},' +
        '"flex":{"input":0.17248,"output":0.51744,"cached_input":0.05488,"multiplier":0.8},' +
        '"batch":{"input":0.1078,"output":0.3234,"cached_input":0.0343,"multiplier":0.5}}}',
    );
  });

  it("every model has the batch tier: 0.5 by default, or the catalog's own multiplier", () => {
    const view = pricingView({ input: "1", output: "2", cached_input: "0.5", tiers: { batch: "0.25" } });
    assert.equal(stringifyJson(view.tiers.batch), '{"input":0.25,"output":0.5,"cached_input":0.125,"multiplier":0.25}');
    assert.deepEqual(effectivePrices({ input: "0.02", output: "0.06", cached_input: "0.01" }, "batch"), {
      input: "0.01",
      output: "0.03",
      cached_input: "0.005",
    });
  });

  it("omits tiers the model lacks; absent discount shows 0", () => {
    const view = pricingView({ input: "0.23", output: "2.30", cached_input: "0.20" });
    assert.equal(
      stringifyJson(view),
      '{"currency":"USD","unit":"per_1m_tokens","list":{"input":0.23,"output":2.3,"cached_input":0.2},' +
        '"discount_percent":0,"tiers":{"default":{"input":0.23,"output":2.3,"cached_input":0.2},"batch":{"input":0.115,"output":1.15,"cached_input":0.1,"multiplier":0.5}}}',
    );
    assert.ok(view.list.input instanceof ExactDecimal);
    assert.deepEqual(Object.keys(pricingView(flexOnly).tiers), ["default", "flex", "batch"]);
  });
});
