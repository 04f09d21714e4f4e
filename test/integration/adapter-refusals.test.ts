import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

// Degenerate PEFT adapters sent to POST /v1/adapters (issue 54's probe found them accepted as
// `ready`, answering ""): each is a 400 invalid_adapter naming the reason and the file at fault.
// The adapters are built here: one rank-1 pair on SmolLM2's layer 0 q_proj (576 in, 576 out).

const HIDDEN = 576;
const STEM = "base_model.model.model.layers.0.self_attn.q_proj";
const CONFIG = {
  peft_type: "LORA",
  base_model_name_or_path: SMOLLM2,
  r: 1,
  lora_alpha: 2,
  bias: "none",
  target_modules: ["q_proj"],
};

interface Entry {
  values: Float32Array;
  shape: number[];
}

/** A safetensors file of F32 tensors laid end to end; `offsets` replaces an entry's data_offsets. */
function safetensors(tensors: Record<string, Entry>, offsets: Record<string, [number, number]> = {}): Buffer {
  const header: Record<string, unknown> = {};
  const blobs: Buffer[] = [];
  let at = 0;
  for (const [name, { values, shape }] of Object.entries(tensors)) {
    header[name] = { dtype: "F32", shape, data_offsets: offsets[name] ?? [at, at + values.byteLength] };
    blobs.push(Buffer.from(values.buffer, values.byteOffset, values.byteLength));
    at += values.byteLength;
  }
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, json, ...blobs]);
}

/** lora_A [1, 576] and lora_B [576, 1], small values unless given. */
function pair(
  a = Float32Array.from({ length: HIDDEN }, (_, i) => Math.sin(i) / 24),
  b = Float32Array.from({ length: HIDDEN }, (_, i) => Math.cos(i) / 10),
) {
  return { [`${STEM}.lora_A.weight`]: { values: a, shape: [1, HIDDEN] }, [`${STEM}.lora_B.weight`]: { values: b, shape: [HIDDEN, 1] } };
}

describe("degenerate adapters are refused at upload, naming the reason", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ keyArgs: ["--manage-deployments"], env: { SWITCHYARD_MAX_CONTEXT: "1024" } });
  });
  after(async () => {
    await server?.stop();
  });

  async function upload(name: string, config: string | object, model: Buffer) {
    const form = new FormData();
    form.append("base_model", SMOLLM2);
    form.append("name", name);
    form.append("adapter_config", new Blob([typeof config === "string" ? config : JSON.stringify(config)]), "adapter_config.json");
    form.append("adapter_model", new Blob([new Uint8Array(model)]), "adapter_model.safetensors");
    const response = await fetch(`${server.url}/v1/adapters`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}` },
      body: form,
    });
    return {
      status: response.status,
      body: (await response.json()) as { error: { type: string; code: string; param: string; message: string } },
    };
  }

  async function assertRefused(name: string, config: string | object, model: Buffer, param: string, reason: RegExp) {
    const refused = await upload(name, config, model);
    assert.equal(refused.status, 400, `${name}: ${JSON.stringify(refused.body)}`);
    assert.equal(refused.body.error.type, "invalid_request_error");
    assert.equal(refused.body.error.code, "invalid_adapter", name);
    assert.equal(refused.body.error.param, param, name);
    assert.match(refused.body.error.message, reason, name);
  }

  test("the adapter built here is taken as it is: the refusals below are its faults alone", async () => {
    const taken = await upload("sound", CONFIG, safetensors(pair()));
    assert.equal(taken.status, 200, JSON.stringify(taken.body));
  });

  test("non-finite weights: an all-NaN lora_A, an all-Inf lora_B, one NaN among finite values", async () => {
    const nan = new Float32Array(HIDDEN).fill(Number.NaN);
    await assertRefused("nan-a", CONFIG, safetensors(pair(nan)), "adapter_model", /lora_A\.weight holds NaN.*finite/);
    const inf = new Float32Array(HIDDEN).fill(Number.POSITIVE_INFINITY);
    await assertRefused("inf-b", CONFIG, safetensors(pair(undefined, inf)), "adapter_model", /lora_B\.weight holds Infinity.*finite/);
    const one = Float32Array.from({ length: HIDDEN }, (_, i) => (i === 300 ? Number.NaN : 0.01));
    await assertRefused("one-nan", CONFIG, safetensors(pair(one)), "adapter_model", /holds NaN \(at index 300\)/);
  });

  test("an absurd lora_alpha (1e308) is refused with the scale it would apply", async () => {
    await assertRefused(
      "huge-alpha",
      { ...CONFIG, lora_alpha: 1e308 },
      safetensors(pair()),
      "adapter_config",
      /lora_alpha 1e\+308 scales the update by 1e\+308.*at most 256/,
    );
  });

  test("two tensors whose data_offsets overlap", async () => {
    const bytes = HIDDEN * 4;
    const overlapping = safetensors(pair(), { [`${STEM}.lora_B.weight`]: [bytes / 2, bytes / 2 + bytes] });
    await assertRefused("overlap", CONFIG, overlapping, "adapter_model", /lora_A\.weight and .*lora_B\.weight overlap \(data_offsets\)/);
  });

  test("adapter_config.json without base_model_name_or_path, or not JSON, is refused naming adapter_config", async () => {
    const { base_model_name_or_path: _, ...unnamed } = CONFIG;
    await assertRefused(
      "unnamed",
      unnamed,
      safetensors(pair()),
      "adapter_config",
      /does not name the model .*base_model_name_or_path.*SmolLM2-135M-Instruct/,
    );
    await assertRefused("not-json", "{ not json", safetensors(pair()), "adapter_config", /adapter_config\.json is not JSON/);
  });
});
