import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkGgufLora, MAX_LORA_SCALE } from "../../src/catalog/convert/lora-checks.js";
import { loraAlpha, parsePeftConfig } from "../../src/catalog/convert/peft-lora.js";
import { readSafetensors } from "../../src/catalog/convert/safetensors.js";
import type { GgufLayout } from "../../src/catalog/gguf/layout.js";

// The sanity bounds on an adapter (issue 54's degenerate adapters): its scale, its config's JSON,
// its safetensors' byte ranges, a GGUF LoRA's alpha. Through a real upload: test/integration/adapter-refusals.test.ts.

function layout(general: Record<string, string>, numbers: Record<string, number>, tensors: Array<[string, number[]]>): GgufLayout {
  return {
    version: 3,
    alignment: 32,
    metadataEnd: 0,
    fileTypeValueOffset: null,
    general,
    numbers,
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

describe("an adapter's sanity bounds", () => {
  test("alpha / r up to MAX_LORA_SCALE is taken, past it refused; rsLoRA's scale is alpha / sqrt(r)", () => {
    assert.equal(loraAlpha({ r: 8, lora_alpha: 8 * MAX_LORA_SCALE }), 8 * MAX_LORA_SCALE);
    assert.throws(() => loraAlpha({ r: 8, lora_alpha: 8 * MAX_LORA_SCALE + 1 }), /scales the update by 256\.125 \(alpha \/ r\)/);
    assert.equal(loraAlpha({ r: 16, lora_alpha: 4 * MAX_LORA_SCALE, use_rslora: true }), 16 * MAX_LORA_SCALE);
    assert.throws(() => loraAlpha({ r: 16, lora_alpha: 4 * MAX_LORA_SCALE + 4, use_rslora: true }), /alpha \/ sqrt\(r\)/);
    assert.throws(() => loraAlpha({ r: 8, lora_alpha: 1e308 }), /lora_alpha 1e\+308/);
    assert.throws(() => loraAlpha({ r: 8.5, lora_alpha: 16 }), /positive whole rank/);
  });

  test("adapter_config.json must be a JSON object", () => {
    assert.deepEqual(parsePeftConfig('{"r": 8}'), { r: 8 });
    assert.throws(() => parsePeftConfig("{ not json"), /adapter_config\.json is not JSON/);
    assert.throws(() => parsePeftConfig("[1, 2]"), /not a JSON object/);
  });

  test("safetensors' tensors may not share bytes; laid end to end (or empty) they may", () => {
    const file = (offsets: Array<[number, number]>) => {
      const header = Object.fromEntries(offsets.map((o, i) => [`t${i}`, { dtype: "F32", shape: [(o[1] - o[0]) / 4], data_offsets: o }]));
      const json = Buffer.from(JSON.stringify(header));
      const length = Buffer.alloc(8);
      length.writeBigUInt64LE(BigInt(json.length));
      return Buffer.concat([length, json, Buffer.alloc(64)]);
    };
    assert.equal(
      readSafetensors(
        file([
          [0, 16],
          [16, 32],
          [32, 32],
        ]),
      ).size,
      3,
    );
    assert.throws(
      () =>
        readSafetensors(
          file([
            [16, 32],
            [0, 20],
          ]),
        ),
      /tensors t1 and t0 overlap/,
    );
    assert.throws(
      () =>
        readSafetensors(
          file([
            [0, 32],
            [8, 16],
          ]),
        ),
      /overlap/,
    );
  });

  test("a GGUF LoRA's adapter.lora.alpha is finite and within the scale bound", () => {
    const base = layout({ "general.architecture": "llama" }, {}, [["blk.0.attn_q.weight", [4, 6]]]);
    const lora = (alpha?: number) =>
      layout(
        { "general.architecture": "llama", "general.type": "adapter", "adapter.type": "lora" },
        alpha === undefined ? {} : { "adapter.lora.alpha": alpha },
        [
          ["blk.0.attn_q.weight.lora_a", [4, 2]],
          ["blk.0.attn_q.weight.lora_b", [2, 6]],
        ],
      );
    for (const alpha of [undefined, 0, 4, 2 * MAX_LORA_SCALE]) checkGgufLora(lora(alpha), base);
    assert.throws(() => checkGgufLora(lora(2 * MAX_LORA_SCALE + 2), base), /scales the update by 257/);
    assert.throws(() => checkGgufLora(lora(Number.POSITIVE_INFINITY), base), /Infinity, not a positive number/);
    assert.throws(() => checkGgufLora(lora(Number.NaN), base), /NaN, not a positive number/);
  });
});
