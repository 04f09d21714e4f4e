/**
 * The KV cache's shape from a GGUF file's metadata (layers, KV heads, key and value lengths), read
 * from the header alone: what one KV cell of the model costs, without loading it.
 */
import { open } from "node:fs/promises";

export interface KvShape {
  layers: number;
  /** The most KV heads any layer has (a per-layer array is allowed by the format). */
  kvHeads: number;
  keyLength: number;
  valueLength: number;
}

/** The header and metadata of any catalog model fit in this (the tokenizer arrays are the bulk). */
const HEADER_BYTES = 48 * 1024 * 1024;
/** Byte sizes of GGUF's scalar value types, by type id. */
const SCALAR: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;

/** Shapes already read, by path and size and mtime: every instance load asks, and a header is megabytes. */
const known = new Map<string, KvShape>();

export async function readKvShape(path: string): Promise<KvShape> {
  const file = await open(path, "r");
  try {
    const { size, mtimeMs } = await file.stat();
    const key = `${path}\u0000${size}\u0000${mtimeMs}`;
    const cached = known.get(key);
    if (cached) return cached;
    const buffer = Buffer.alloc(Math.min(size, HEADER_BYTES));
    await file.read(buffer, 0, buffer.length, 0);
    const shape = kvShapeOf(readMetadata(buffer));
    known.set(key, shape);
    return shape;
  } finally {
    await file.close();
  }
}

/** Numbers and strings of the metadata (arrays of numbers too); other arrays are skipped. */
export function readMetadata(buffer: Buffer): Map<string, unknown> {
  if (buffer.toString("latin1", 0, 4) !== "GGUF") throw new Error("not a GGUF file");
  let at = 16; // magic, version, tensor count
  const count = Number(buffer.readBigUInt64LE(at));
  at += 8;
  const string = () => {
    const length = Number(buffer.readBigUInt64LE(at));
    const text = buffer.toString("utf8", at + 8, at + 8 + length);
    at += 8 + length;
    return text;
  };
  const scalar = (type: number): unknown => {
    if (type === STRING) return string();
    const bytes = SCALAR[type];
    if (bytes === undefined) throw new Error(`unknown GGUF value type ${type}`);
    const value =
      type === 6
        ? buffer.readFloatLE(at)
        : type === 12
          ? buffer.readDoubleLE(at)
          : bytes === 8
            ? Number(buffer.readBigInt64LE(at))
            : buffer.readUIntLE(at, bytes);
    at += bytes;
    return value;
  };
  const metadata = new Map<string, unknown>();
  for (let i = 0; i < count; i++) {
    const key = string();
    const type = buffer.readUInt32LE(at);
    at += 4;
    if (type !== ARRAY) {
      metadata.set(key, scalar(type));
      continue;
    }
    const itemType = buffer.readUInt32LE(at);
    const items = Number(buffer.readBigUInt64LE(at + 4));
    at += 12;
    if (itemType !== STRING && SCALAR[itemType] !== undefined && items <= 4096)
      metadata.set(
        key,
        Array.from({ length: items }, () => scalar(itemType)),
      );
    else if (itemType !== STRING && SCALAR[itemType] !== undefined) at += items * SCALAR[itemType]!;
    else for (let j = 0; j < items; j++) scalar(itemType);
  }
  return metadata;
}

function kvShapeOf(metadata: Map<string, unknown>): KvShape {
  const arch = metadata.get("general.architecture");
  if (typeof arch !== "string") throw new Error("the GGUF names no architecture");
  const number = (key: string): number | undefined => {
    const value = metadata.get(`${arch}.${key}`);
    if (Array.isArray(value)) return Math.max(...(value as number[]));
    return typeof value === "number" ? value : undefined;
  };
  const layers = number("block_count");
  const heads = number("attention.head_count");
  const embedding = number("embedding_length");
  if (!layers || !heads || !embedding) throw new Error(`the GGUF lacks ${arch}'s layer or head counts`);
  const headLength = Math.floor(embedding / heads);
  return {
    layers,
    kvHeads: number("attention.head_count_kv") ?? heads,
    keyLength: number("attention.key_length") ?? headLength,
    valueLength: number("attention.value_length") ?? headLength,
  };
}
