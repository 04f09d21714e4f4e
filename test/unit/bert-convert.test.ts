import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { bertVocabulary, ggufTensorName, writeBertGguf, type BertPrecision } from "../../src/catalog/convert/bert-gguf.js";
import { readSafetensors } from "../../src/catalog/convert/safetensors.js";
import { floatToHalfBits, halfBitsToFloat } from "../../src/catalog/gguf/half.js";
import { GgmlType, readGgufLayout } from "../../src/catalog/gguf/layout.js";
import { quantizeQ8_0 } from "../../src/catalog/gguf/q8-0.js";
import { writeGguf } from "../../src/catalog/gguf/writer.js";

test("Hugging Face BERT tensor names map to llama.cpp's, and the unused ones are dropped", () => {
  assert.equal(ggufTensorName("embeddings.word_embeddings.weight"), "token_embd.weight");
  assert.equal(ggufTensorName("bert.embeddings.LayerNorm.gamma"), "token_embd_norm.weight");
  assert.equal(ggufTensorName("embeddings.LayerNorm.bias"), "token_embd_norm.bias");
  assert.equal(ggufTensorName("encoder.layer.5.attention.self.query.weight"), "blk.5.attn_q.weight");
  assert.equal(ggufTensorName("encoder.layer.0.attention.output.LayerNorm.bias"), "blk.0.attn_output_norm.bias");
  assert.equal(ggufTensorName("encoder.layer.2.intermediate.dense.weight"), "blk.2.ffn_up.weight");
  assert.equal(ggufTensorName("encoder.layer.2.output.dense.bias"), "blk.2.ffn_down.bias");
  assert.equal(ggufTensorName("encoder.layer.3.output.LayerNorm.weight"), "blk.3.layer_output_norm.weight");
  for (const dropped of ["embeddings.position_ids", "pooler.dense.weight", "cls.predictions.bias"])
    assert.equal(ggufTensorName(dropped), null);
  assert.throws(() => ggufTensorName("encoder.layer.0.mystery.weight"), /unexpected BERT tensor/);
});

test("the WordPiece vocabulary is written in llama.cpp's phantom-space form; special tokens stay as they are", () => {
  const { tokens, types } = bertVocabulary({
    added_tokens: [
      { id: 0, content: "[PAD]", special: true },
      { id: 1, content: "[CLS]", special: true },
    ],
    model: { type: "WordPiece", vocab: { "[PAD]": 0, "[CLS]": 1, hello: 2, "##s": 3 } },
  });
  assert.deepEqual(tokens, ["[PAD]", "[CLS]", "\u2581hello", "s"]);
  assert.deepEqual(types, [3, 3, 1, 1]);
  assert.throws(() => bertVocabulary({ added_tokens: [], model: { type: "WordPiece", vocab: { a: 0, b: 2 } } }), /no token with id 1/);
});

test("a written GGUF reads back: metadata, tensor shapes, types and offsets", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gguf-writer-"));
  try {
    const path = join(dir, "tiny.gguf");
    const data = Buffer.from(new Float32Array([1, 2, 3, 4, 5, 6]).buffer);
    await writeGguf(
      path,
      [
        ["general.architecture", { str: "bert" }],
        ["general.name", { str: "tiny" }],
        ["bert.block_count", { u32: 1 }],
        ["tokenizer.ggml.tokens", { strings: ["a", "b"] }],
      ],
      [
        { name: "a.weight", dims: [3, 2], type: GgmlType.F32, data },
        { name: "b.bias", dims: [2], type: GgmlType.F32, data: data.subarray(0, 8) },
      ],
    );
    const layout = await readGgufLayout(path);
    assert.equal(layout.general["general.architecture"], "bert");
    assert.deepEqual(
      layout.tensors.map((t) => [t.name, t.dims.map(Number), t.type, t.offset]),
      [
        ["a.weight", [3, 2], 0, 0],
        ["b.bias", [2], 0, 32],
      ],
    );
    assert.equal(layout.fileSize, layout.dataStart + 64);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("safetensors: a header naming bytes outside the file is refused", () => {
  const header = Buffer.from(JSON.stringify({ t: { dtype: "F32", shape: [4], data_offsets: [0, 16] } }));
  const file = Buffer.concat([Buffer.alloc(8), header, Buffer.alloc(8)]);
  file.writeBigUInt64LE(BigInt(header.length));
  assert.throws(() => readSafetensors(file), /outside the file/);
});

test("Q8_0 blocks are ggml's: an f16 scale of max|x|/127, then round(x/scale) with halves away from zero", () => {
  const ramp = Float32Array.from({ length: 32 }, (_, j) => (j - 16) / 16);
  const block = quantizeQ8_0(ramp);
  assert.equal(block.length, 34);
  const scale = halfBitsToFloat(block.readUInt16LE(0));
  assert.equal(block.readUInt16LE(0), floatToHalfBits(1 / 127));
  assert.equal(block.readInt8(2), -127);
  for (let j = 0; j < 32; j++) assert.ok(Math.abs(block.readInt8(2 + j) * scale - ramp[j]!) <= scale / 2 + 1e-6, `value ${j}`);
  const halves = new Float32Array(32);
  halves.set([127, 2.5, -2.5, 0.5, -0.5]);
  const rounded = quantizeQ8_0(halves);
  assert.equal(halfBitsToFloat(rounded.readUInt16LE(0)), 1);
  assert.deepEqual(
    [1, 2, 3, 4].map((j) => rounded.readInt8(2 + j)),
    [3, -3, 1, -1],
  );
  const zeros = quantizeQ8_0(new Float32Array(64));
  assert.deepEqual([zeros.length, Math.max(...zeros)], [68, 0]);
  assert.throws(() => quantizeQ8_0(new Float32Array(48)), /multiple of 32/);
});

/** A tiny BERT (hidden 64, four WordPiece tokens) of `tensors` written as a GGUF in `precision`, and its layout. */
async function writeTinyBert(
  dir: string,
  tensors: Map<string, { dtype: string; shape: number[]; data: Buffer }>,
  layers: number,
  precision: BertPrecision,
) {
  const config = {
    model_type: "bert",
    num_hidden_layers: layers,
    max_position_embeddings: 8,
    hidden_size: 64,
    intermediate_size: 96,
    num_attention_heads: 2,
    layer_norm_eps: 1e-12,
  };
  const tokenizer = {
    added_tokens: [{ id: 0, content: "[CLS]", special: true }],
    model: { type: "WordPiece", vocab: { "[CLS]": 0, a: 1, b: 2, c: 3 } },
  };
  const path = join(dir, "tiny.gguf");
  await writeBertGguf({ config, tokenizer, pooling: "mean", normalize: true, tensors }, path, "tiny", precision);
  return { path, layout: await readGgufLayout(path) };
}

test("q8_0 writes the layers' matrices as Q8_0, attn_v and ffn_up as F16, token embeddings, biases and norms as F32, and a row that no block divides as F16", async () => {
  const dir = mkdtempSync(join(tmpdir(), "bert-q8-"));
  try {
    const tensor = (shape: number[]) => ({
      dtype: "F32",
      shape,
      data: Buffer.from(Float32Array.from({ length: shape.reduce((a, b) => a * b) }, (_, i) => Math.sin(i)).buffer),
    });
    const tensors = new Map([
      ["embeddings.word_embeddings.weight", tensor([4, 64])],
      ["encoder.layer.0.attention.self.query.weight", tensor([64, 64])],
      ["encoder.layer.0.attention.self.query.bias", tensor([64])],
      ["encoder.layer.0.attention.self.value.weight", tensor([64, 64])],
      ["encoder.layer.0.intermediate.dense.weight", tensor([96, 64])],
      ["encoder.layer.0.output.dense.weight", tensor([64, 96])],
      ["encoder.layer.0.output.LayerNorm.weight", tensor([64])],
      ["encoder.layer.1.attention.output.dense.weight", tensor([40, 40])],
    ]);
    const { layout } = await writeTinyBert(dir, tensors, 2, "q8_0");
    const types = Object.fromEntries(layout.tensors.map((t) => [t.name, t.type]));
    assert.deepEqual(types, {
      "token_embd.weight": GgmlType.F32,
      "blk.0.attn_q.weight": GgmlType.Q8_0,
      "blk.0.attn_q.bias": GgmlType.F32,
      "blk.0.attn_v.weight": GgmlType.F16,
      "blk.0.ffn_up.weight": GgmlType.F16,
      "blk.0.ffn_down.weight": GgmlType.Q8_0,
      "blk.0.layer_output_norm.weight": GgmlType.F32,
      "blk.1.attn_output.weight": GgmlType.F16,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("bf16 writes every layer matrix and the token embeddings as BF16 (a float32's upper half, rounded to nearest even), biases and norms as F32", async () => {
  const dir = mkdtempSync(join(tmpdir(), "bert-bf16-"));
  try {
    // 1 + 2^-8 is halfway between two bf16 values (1 and 1 + 2^-7): even rounds down; 1 + 3·2^-8 rounds up.
    const values = Float32Array.from({ length: 64 * 64 }, (_, i) => [1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.5, Math.PI][i % 4]!);
    const tensor = (shape: number[]) => ({
      dtype: "F32",
      shape,
      data: Buffer.from(
        values.slice(
          0,
          shape.reduce((a, b) => a * b),
        ).buffer,
      ),
    });
    const tensors = new Map([
      ["embeddings.word_embeddings.weight", tensor([4, 64])],
      ["encoder.layer.0.attention.self.query.weight", tensor([64, 64])],
      ["encoder.layer.0.attention.self.query.bias", tensor([64])],
    ]);
    const { path, layout } = await writeTinyBert(dir, tensors, 1, "bf16");
    const types = Object.fromEntries(layout.tensors.map((t) => [t.name, t.type]));
    assert.deepEqual(types, {
      "token_embd.weight": GgmlType.BF16,
      "blk.0.attn_q.weight": GgmlType.BF16,
      "blk.0.attn_q.bias": GgmlType.F32,
    });
    const query = layout.tensors.find((t) => t.name === "blk.0.attn_q.weight")!;
    const bytes = readFileSync(path).subarray(layout.dataStart + query.offset, layout.dataStart + query.offset + 8);
    const back = Array.from({ length: 4 }, (_, i) => new Float32Array(Uint32Array.of(bytes.readUInt16LE(i * 2) << 16).buffer)[0]);
    assert.deepEqual(back, [1, 1 + 2 ** -6, -2.5, 3.140625]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
