/**
 * Re-encoding at pull time (catalog `serve_format: "f16"`): the half-precision conversion, Q4_1 expansion on
 * hand-made blocks, and the real SmolLM2 Q4_1 file re-encoded and read back by node-llama-cpp's own GGUF reader.
 */
import assert from "node:assert/strict";
import { mkdtemp, open, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { readGgufFileInfo } from "node-llama-cpp";
import { expandQ4_1, expandToF16 } from "../../src/catalog/gguf/expand-f16.js";
import { floatToHalfBits, halfBitsToFloat } from "../../src/catalog/gguf/half.js";
import { GgmlType, readGgufLayout } from "../../src/catalog/gguf/layout.js";
import { loadCatalog } from "../../src/catalog/load.js";
import { findPulledModel } from "../../src/catalog/pull.js";
import { ensureServedFile } from "../../src/catalog/served-file.js";
import { serveFormatSetting } from "../../src/config/environment.js";
import type { CatalogEntry } from "../../src/catalog/types.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { SMOLLM2 } from "../helpers/server.js";

describe("half precision", () => {
  test("exact values, the range limits and subnormals convert both ways", () => {
    const cases: Array<[number, number]> = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.5, 0x3800],
      [65504, 0x7bff],
      [2 ** -14, 0x0400],
      [2 ** -24, 0x0001],
      [Infinity, 0x7c00],
    ];
    for (const [value, bits] of cases) {
      assert.equal(floatToHalfBits(value), bits, `${value}`);
      assert.equal(halfBitsToFloat(bits), value);
    }
    assert.ok(Number.isNaN(halfBitsToFloat(floatToHalfBits(NaN))));
  });

  test("rounds to nearest, ties to even, overflows to infinity, underflows to zero", () => {
    assert.equal(floatToHalfBits(1 + 2 ** -11), 0x3c00, "halfway, the even neighbour is 1");
    assert.equal(floatToHalfBits(1 + 3 * 2 ** -11), 0x3c02, "halfway, the even neighbour is 1 + 2^-9");
    assert.equal(floatToHalfBits(1 + 2 ** -11 + 2 ** -20), 0x3c01, "just above halfway rounds up");
    assert.equal(floatToHalfBits(65520), 0x7c00);
    assert.equal(floatToHalfBits(2 ** -26), 0x0000);
    assert.equal(floatToHalfBits(3 * 2 ** -25), 0x0002, "a subnormal halfway case rounds to even");
    for (let bits = 0; bits < 0x7c00; bits += 7) assert.equal(floatToHalfBits(halfBitsToFloat(bits)), bits, `round trip of ${bits}`);
  });
});

describe("Q4_1 expansion", () => {
  test("each weight becomes d * q + m, the low nibbles first, then the high ones", () => {
    const block = Buffer.alloc(20);
    block.writeUInt16LE(floatToHalfBits(0.5), 0);
    block.writeUInt16LE(floatToHalfBits(-1), 2);
    for (let j = 0; j < 16; j++) block[4 + j] = (15 - j) * 16 + j; // low nibble j, high nibble 15 - j
    const out = expandQ4_1(block);
    const values = Array.from({ length: 32 }, (_, i) => halfBitsToFloat(out.readUInt16LE(i * 2)));
    assert.deepEqual(
      values.slice(0, 16),
      Array.from({ length: 16 }, (_, j) => 0.5 * j - 1),
    );
    assert.deepEqual(
      values.slice(16),
      Array.from({ length: 16 }, (_, j) => 0.5 * (15 - j) - 1),
    );
  });
});

describe("the SmolLM2 Q4_1 file served as F16", () => {
  let dir: string;
  let entry: CatalogEntry;
  let published: { path: string; bytes: number };
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "switchyard-f16-"));
    entry = { ...(await loadCatalog()).find((e) => e.id === SMOLLM2)!, serve_format: "f16" };
    const pulled = await findPulledModel(entry, resolveModelsDir(), "published");
    assert.ok(pulled, "SmolLM2 is pulled (npm test pulls it first)");
    published = pulled.published;
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test("every Q4_1 tensor becomes F16 with the same values; everything else is kept byte for byte", async () => {
    const target = join(dir, "expanded.gguf");
    const result = await expandToF16(published.path, target);
    const before = await readGgufLayout(published.path);
    const afterLayout = await readGgufLayout(target);
    assert.equal(result.expandedTensors, before.tensors.filter((t) => t.type === GgmlType.Q4_1).length);
    assert.ok(result.expandedTensors > 200);
    assert.equal(result.bytes, (await stat(target)).size);

    // node-llama-cpp's own reader (not ours) sees the same model: metadata equal but for the file type.
    const original = await readGgufFileInfo(published.path, { readTensorInfo: true });
    const expanded = await readGgufFileInfo(target, { readTensorInfo: true });
    assert.deepEqual(
      { ...expanded.metadata, general: { ...expanded.metadata.general, file_type: 0 } },
      { ...original.metadata, general: { ...original.metadata.general, file_type: 0 } },
    );
    assert.equal(expanded.metadata.general.file_type, 1, "MOSTLY_F16");
    assert.deepEqual(
      expanded.fullTensorInfo!.map((t) => [t.name, t.dimensions, t.ggmlType]),
      original.fullTensorInfo!.map((t) => [t.name, t.dimensions, t.ggmlType === GgmlType.Q4_1 ? GgmlType.F16 : t.ggmlType]),
    );

    const source = await open(published.path, "r");
    const copy = await open(target, "r");
    try {
      const read = async (handle: typeof source, at: number, length: number) => {
        const bytes = Buffer.alloc(length);
        await handle.read(bytes, 0, length, at);
        return bytes;
      };
      for (const [i, tensor] of before.tensors.entries()) {
        const other = afterLayout.tensors[i]!;
        if (tensor.type === GgmlType.Q4_1) {
          // The first and the last block of each tensor, value by value.
          for (const block of [0, tensor.elements / 32 - 1]) {
            const q = await read(source, before.dataStart + tensor.offset + block * 20, 20);
            const f16 = await read(copy, afterLayout.dataStart + other.offset + block * 64, 64);
            const d = halfBitsToFloat(q.readUInt16LE(0));
            const m = halfBitsToFloat(q.readUInt16LE(2));
            for (let j = 0; j < 32; j++) {
              const nibble = j < 16 ? q[4 + j]! & 0x0f : q[4 + j - 16]! >> 4;
              const expected = d * nibble + m;
              const actual = halfBitsToFloat(f16.readUInt16LE(j * 2));
              assert.ok(
                Math.abs(actual - expected) <= Math.abs(expected) * 2 ** -11 + 2 ** -24,
                `${tensor.name} block ${block} value ${j}: ${actual} vs ${expected}`,
              );
            }
          }
        } else {
          const bytes = tensor.type === GgmlType.F32 ? tensor.elements * 4 : Math.min(4096, tensor.elements);
          assert.deepEqual(
            await read(copy, afterLayout.dataStart + other.offset, bytes),
            await read(source, before.dataStart + tensor.offset, bytes),
            tensor.name,
          );
        }
      }
    } finally {
      await source.close();
      await copy.close();
    }
  });

  test("the copy is made once, re-verified on later pulls, and made again if it was damaged", async () => {
    const modelDir = join(dir, "cache");
    const publishedFile = {
      ...published,
      sha256: (await readFile(`${published.path}.json`, "utf8")).match(/"sha256": "([0-9a-f]+)"/)![1]!,
    };
    const first = await ensureServedFile(entry, publishedFile, modelDir, "catalog");
    assert.notEqual(first.path, published.path);
    const madeAt = (await stat(first.path)).mtimeMs;
    const second = await ensureServedFile(entry, publishedFile, modelDir, "catalog");
    assert.deepEqual(second, first);
    assert.equal((await stat(second.path)).mtimeMs, madeAt, "not re-encoded");

    const handle = await open(first.path, "r+");
    await handle.write(Buffer.from([0xff, 0xff]), 0, 2, first.bytes - 2);
    await handle.close();
    const third = await ensureServedFile(entry, publishedFile, modelDir, "catalog");
    assert.equal(third.sha256, first.sha256, "re-encoded to the same bytes");

    assert.equal(
      await ensureServedFile({ ...entry, serve_format: undefined }, publishedFile, modelDir, "catalog"),
      publishedFile,
      "no serve_format: served as published",
    );
    assert.equal(
      await ensureServedFile(entry, publishedFile, modelDir, "published"),
      publishedFile,
      "SWITCHYARD_SERVE_FORMAT=published wins",
    );
    assert.deepEqual(
      await ensureServedFile({ ...entry, serve_format: undefined }, publishedFile, modelDir, "f16"),
      third,
      "SWITCHYARD_SERVE_FORMAT=f16 wins",
    );
  });

  test("SWITCHYARD_SERVE_FORMAT is catalog, published or f16; the default catalog serves SmolLM2 as published", async () => {
    assert.equal(serveFormatSetting({}), "catalog");
    assert.equal(serveFormatSetting({ SWITCHYARD_SERVE_FORMAT: "F16" }), "f16");
    assert.throws(() => serveFormatSetting({ SWITCHYARD_SERVE_FORMAT: "q8_0" }), /catalog, published or f16/);
    const catalogEntry = (await loadCatalog()).find((e) => e.id === SMOLLM2)!;
    assert.equal((await findPulledModel(catalogEntry, resolveModelsDir(), "catalog"))?.path, published.path);
  });
});
