/**
 * Re-encodes a GGUF so its Q4_1 tensors are stored as F16, keeping every other tensor and all metadata.
 * The values are the same (each Q4_1 weight is d*q + m, rounded once to half precision); only the storage
 * changes, to one llama.cpp's CPU kernels run faster (see README, "Served format").
 */
import { createHash } from "node:crypto";
import { open, rename } from "node:fs/promises";
import { removeQuietly, tempPathBeside } from "../temp.js";
import { floatToHalfBits, halfBitsToFloat } from "./half.js";
import { alignUp, FILE_TYPE_MOSTLY_F16, GgmlType, readGgufLayout, type TensorLayout } from "./layout.js";

const Q4_1_BLOCK = { values: 32, bytes: 20 } as const;

export interface ExpandResult {
  bytes: number;
  sha256: string;
  expandedTensors: number;
}

/** Whether the file has anything to expand: a file with no Q4_1 tensor is served as it is. */
export async function hasExpandableTensors(path: string): Promise<boolean> {
  return (await readGgufLayout(path)).tensors.some((t) => t.type === GgmlType.Q4_1);
}

/** Writes the F16 form of `sourcePath` to `targetPath` (atomically: a crash leaves no partial file under that name). */
export async function expandToF16(sourcePath: string, targetPath: string): Promise<ExpandResult> {
  const layout = await readGgufLayout(sourcePath);
  const stored = storedSizes(layout.tensors, layout.fileSize - layout.dataStart, layout.alignment);
  const plan = layout.tensors.map((tensor, i) => {
    const expand = tensor.type === GgmlType.Q4_1;
    return {
      tensor,
      expand,
      type: expand ? GgmlType.F16 : tensor.type,
      size: expand ? alignUp(tensor.elements * 2, layout.alignment) : stored[i]!,
    };
  });

  const source = await open(sourcePath, "r");
  const temp = tempPathBeside(targetPath);
  const target = await open(temp, "w");
  const hash = createHash("sha256");
  let written = 0;
  const write = async (chunk: Buffer) => {
    hash.update(chunk);
    await target.write(chunk, 0, chunk.length, written);
    written += chunk.length;
  };
  try {
    const metadata = Buffer.alloc(layout.metadataEnd);
    await source.read(metadata, 0, metadata.length, 0);
    if (layout.fileTypeValueOffset !== null) metadata.writeUInt32LE(FILE_TYPE_MOSTLY_F16, layout.fileTypeValueOffset);
    await write(metadata);

    let offset = 0;
    const infos: Buffer[] = [];
    for (const step of plan) {
      infos.push(tensorInfo(step.tensor, step.type, offset));
      offset += step.size;
    }
    const infoBytes = Buffer.concat(infos);
    await write(
      Buffer.concat([infoBytes, Buffer.alloc(alignUp(written + infoBytes.length, layout.alignment) - written - infoBytes.length)]),
    );

    for (const [i, step] of plan.entries()) {
      const raw = Buffer.alloc(
        step.expand
          ? (step.tensor.elements / Q4_1_BLOCK.values) * Q4_1_BLOCK.bytes
          : Math.min(stored[i]!, layout.fileSize - layout.dataStart - step.tensor.offset),
      );
      await source.read(raw, 0, raw.length, layout.dataStart + step.tensor.offset);
      const data = step.expand ? expandQ4_1(raw) : raw;
      await write(data.length === step.size ? data : Buffer.concat([data, Buffer.alloc(step.size - data.length)]));
    }
    await target.close();
    await rename(temp, targetPath);
    return { bytes: written, sha256: hash.digest("hex"), expandedTensors: plan.filter((s) => s.expand).length };
  } finally {
    await target.close().catch(() => {});
    await source.close();
    await removeQuietly(temp);
  }
}

/** Each tensor's bytes in the source, padding included: the distance to the tensor stored after it. */
function storedSizes(tensors: TensorLayout[], dataBytes: number, alignment: number): number[] {
  const byOffset = tensors.map((t, i) => ({ offset: t.offset, i })).sort((a, b) => a.offset - b.offset);
  const sizes = new Array<number>(tensors.length);
  byOffset.forEach(({ offset, i }, k) => {
    sizes[i] = alignUp((byOffset[k + 1]?.offset ?? dataBytes) - offset, alignment);
  });
  return sizes;
}

function tensorInfo(tensor: TensorLayout, type: number, offset: number): Buffer {
  const name = Buffer.from(tensor.name, "utf8");
  const info = Buffer.alloc(8 + name.length + 4 + 8 * tensor.dims.length + 4 + 8);
  let p = info.writeBigUInt64LE(BigInt(name.length), 0);
  p += name.copy(info, p);
  p = info.writeUInt32LE(tensor.dims.length, p);
  for (const dim of tensor.dims) p = info.writeBigUInt64LE(dim, p);
  p = info.writeUInt32LE(type, p);
  info.writeBigUInt64LE(BigInt(offset), p);
  return info;
}

/** Q4_1 blocks (f16 scale d, f16 minimum m, 32 nibbles: low nibbles are values 0-15, high nibbles 16-31) to F16. */
export function expandQ4_1(blocks: Buffer): Buffer {
  const count = blocks.length / Q4_1_BLOCK.bytes;
  const out = Buffer.alloc(count * Q4_1_BLOCK.values * 2);
  const table = new Uint16Array(16);
  for (let b = 0; b < count; b++) {
    const at = b * Q4_1_BLOCK.bytes;
    const d = halfBitsToFloat(blocks.readUInt16LE(at));
    const m = halfBitsToFloat(blocks.readUInt16LE(at + 2));
    // As ggml's dequantize_row_q4_1 computes it, in single precision.
    for (let q = 0; q < 16; q++) table[q] = floatToHalfBits(Math.fround(Math.fround(q * d) + m));
    const base = b * Q4_1_BLOCK.values * 2;
    for (let j = 0; j < 16; j++) {
      const byte = blocks[at + 4 + j]!;
      out.writeUInt16LE(table[byte & 0x0f]!, base + j * 2);
      out.writeUInt16LE(table[byte >> 4]!, base + (j + 16) * 2);
    }
  }
  return out;
}
