/**
 * Writes a GGUF (version 3) from metadata and tensors held in memory: enough for models small enough
 * to convert at pull time (a sentence-embedding BERT is tens of megabytes). Streams the result to
 * disk, hashing as it goes.
 */
import { createHash } from "node:crypto";
import { open, rename } from "node:fs/promises";
import { removeQuietly, tempPathBeside } from "../temp.js";
import { alignUp } from "./layout.js";

const MAGIC = 0x46554747;
const ALIGNMENT = 32;
const Kind = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;

/** A metadata value with its GGUF type spelled out (JavaScript numbers do not say u32 or f32). */
export type GgufValue =
  | { u32: number }
  | { i32: number }
  | { f32: number }
  | { bool: boolean }
  | { str: string }
  | { strings: string[] }
  | { i32s: Int32Array | number[] };

export interface GgufTensor {
  name: string;
  /** ggml order: the fastest-varying dimension first (the reverse of PyTorch's shape). */
  dims: number[];
  type: number;
  data: Buffer;
}

function stringBytes(text: string): Buffer {
  const bytes = Buffer.from(text, "utf8");
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(bytes.length));
  return Buffer.concat([length, bytes]);
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
const u64 = (n: number) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
};

function encodeValue(value: GgufValue): Buffer {
  if ("u32" in value) return Buffer.concat([u32(Kind.UINT32), u32(value.u32)]);
  if ("i32" in value) {
    const b = Buffer.alloc(4);
    b.writeInt32LE(value.i32);
    return Buffer.concat([u32(Kind.INT32), b]);
  }
  if ("f32" in value) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(value.f32);
    return Buffer.concat([u32(Kind.FLOAT32), b]);
  }
  if ("bool" in value) return Buffer.concat([u32(Kind.BOOL), Buffer.from([value.bool ? 1 : 0])]);
  if ("str" in value) return Buffer.concat([u32(Kind.STRING), stringBytes(value.str)]);
  if ("strings" in value)
    return Buffer.concat([u32(Kind.ARRAY), u32(Kind.STRING), u64(value.strings.length), ...value.strings.map(stringBytes)]);
  const ints = Int32Array.from(value.i32s);
  return Buffer.concat([u32(Kind.ARRAY), u32(Kind.INT32), u64(ints.length), Buffer.from(ints.buffer, ints.byteOffset, ints.byteLength)]);
}

/** The header, metadata and tensor infos, padded to where the first tensor's data starts. */
function encodeHead(metadata: Array<[string, GgufValue]>, tensors: GgufTensor[]): Buffer {
  const parts: Buffer[] = [u32(MAGIC), u32(3), u64(tensors.length), u64(metadata.length)];
  for (const [key, value] of metadata) parts.push(stringBytes(key), encodeValue(value));
  let offset = 0;
  for (const tensor of tensors) {
    parts.push(stringBytes(tensor.name), u32(tensor.dims.length), ...tensor.dims.map(u64), u32(tensor.type), u64(offset));
    offset += alignUp(tensor.data.length, ALIGNMENT);
  }
  const head = Buffer.concat(parts);
  return Buffer.concat([head, Buffer.alloc(alignUp(head.length, ALIGNMENT) - head.length)]);
}

/** Writes the file atomically (a crash leaves no partial file under `path`); returns its size and sha256. */
export async function writeGguf(
  path: string,
  metadata: Array<[string, GgufValue]>,
  tensors: GgufTensor[],
): Promise<{ bytes: number; sha256: string }> {
  const temp = tempPathBeside(path);
  const file = await open(temp, "w");
  const hash = createHash("sha256");
  let written = 0;
  const write = async (chunk: Buffer) => {
    hash.update(chunk);
    await file.write(chunk, 0, chunk.length, written);
    written += chunk.length;
  };
  try {
    await write(encodeHead(metadata, tensors));
    for (const tensor of tensors) {
      await write(tensor.data);
      const padding = alignUp(tensor.data.length, ALIGNMENT) - tensor.data.length;
      if (padding > 0) await write(Buffer.alloc(padding));
    }
    await file.close();
    await rename(temp, path);
    return { bytes: written, sha256: hash.digest("hex") };
  } finally {
    await file.close().catch(() => {});
    await removeQuietly(temp);
  }
}
