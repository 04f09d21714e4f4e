/**
 * Where everything is in a GGUF file (version 2 or 3): the metadata, each tensor's type, shape and data offset.
 * Only what a re-encoding needs is decoded; metadata values are skipped, except the two the format itself uses.
 */
import { open } from "node:fs/promises";

/** ggml tensor types this code reads or writes (ggml.h numbering). */
export const GgmlType = { F32: 0, F16: 1, Q4_1: 3, Q8_0: 8, BF16: 30 } as const;

/** llama.cpp's `general.file_type` for a model whose large tensors are F16. */
export const FILE_TYPE_MOSTLY_F16 = 1;

export interface TensorLayout {
  name: string;
  dims: bigint[];
  type: number;
  /** From the start of the data section. */
  offset: number;
  elements: number;
}

export interface GgufLayout {
  version: number;
  alignment: number;
  /** Bytes [0, metadataEnd) are the header and the metadata key/values, copied as they are. */
  metadataEnd: number;
  /** File offset of the u32 value of `general.file_type`, if the file has it. */
  fileTypeValueOffset: number | null;
  tensors: TensorLayout[];
  /** The `general.*` and `adapter.*` keys with string values (`general.architecture`, `general.name`, `adapter.type`, ...). */
  general: Record<string, string>;
  /** Every key with a scalar u32, i32 or f32 value (`llama.attention.head_count`, `adapter.lora.alpha`, ...). */
  numbers: Record<string, number>;
  dataStart: number;
  fileSize: number;
}

const MAGIC = 0x46554747; // "GGUF", little-endian
const VALUE_SIZE: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;
const UINT32 = 4;
const INT32 = 5;
const FLOAT32 = 6;

class OutOfBytes extends Error {}

/** Reads little-endian fields from a buffer that may hold only the start of the file. */
class Cursor {
  constructor(
    private readonly bytes: Buffer,
    public position = 0,
  ) {}
  private need(n: number): void {
    if (this.position + n > this.bytes.length) throw new OutOfBytes();
  }
  u32(): number {
    this.need(4);
    const value = this.bytes.readUInt32LE(this.position);
    this.position += 4;
    return value;
  }
  u64(): bigint {
    this.need(8);
    const value = this.bytes.readBigUInt64LE(this.position);
    this.position += 8;
    return value;
  }
  count(): number {
    const value = this.u64();
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error("a GGUF count is out of range");
    return Number(value);
  }
  string(): string {
    const length = this.count();
    this.need(length);
    const value = this.bytes.toString("utf8", this.position, this.position + length);
    this.position += length;
    return value;
  }
  skip(n: number): void {
    this.need(n);
    this.position += n;
  }
  skipValue(type: number): void {
    if (type === STRING) return void this.skip(this.count());
    if (type === ARRAY) {
      const itemType = this.u32();
      const items = this.count();
      if (itemType !== STRING && itemType !== ARRAY) return void this.skip(items * valueSize(itemType));
      for (let i = 0; i < items; i++) this.skipValue(itemType);
      return;
    }
    this.skip(valueSize(type));
  }
}

function valueSize(type: number): number {
  const size = VALUE_SIZE[type];
  if (size === undefined) throw new Error(`unknown GGUF metadata type ${type}`);
  return size;
}

/** Reads the head of the file, more of it each time the metadata runs past what was read (tokenizers are large). */
export async function readGgufLayout(path: string): Promise<GgufLayout> {
  const handle = await open(path, "r");
  try {
    const fileSize = (await handle.stat()).size;
    for (let length = Math.min(fileSize, 8 << 20); ; length = Math.min(fileSize, length * 2)) {
      const head = Buffer.alloc(length);
      await handle.read(head, 0, length, 0);
      try {
        return parse(head, fileSize);
      } catch (error) {
        if (!(error instanceof OutOfBytes)) throw error;
        if (length === fileSize) throw new Error("the GGUF header runs past the end of the file");
      }
    }
  } finally {
    await handle.close();
  }
}

function parse(head: Buffer, fileSize: number): GgufLayout {
  const cursor = new Cursor(head);
  if (cursor.u32() !== MAGIC) throw new Error("not a GGUF file");
  const version = cursor.u32();
  if (version !== 2 && version !== 3) throw new Error(`GGUF version ${version} is not supported`);
  const tensorCount = cursor.count();
  const metadataCount = cursor.count();
  let alignment = 32;
  let fileTypeValueOffset: number | null = null;
  const general: Record<string, string> = {};
  const numbers: Record<string, number> = {};
  for (let i = 0; i < metadataCount; i++) {
    const key = cursor.string();
    const type = cursor.u32();
    if (key === "general.alignment" && type === UINT32) alignment = head.readUInt32LE(cursor.position);
    if (key === "general.file_type" && type === UINT32) fileTypeValueOffset = cursor.position;
    if (type === UINT32 || type === INT32 || type === FLOAT32) numbers[key] = readNumber(head, cursor.position, type);
    if ((key.startsWith("general.") || key.startsWith("adapter.")) && type === STRING) general[key] = cursor.string();
    else cursor.skipValue(type);
  }
  const metadataEnd = cursor.position;
  const tensors: TensorLayout[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = cursor.string();
    const dims = Array.from({ length: cursor.u32() }, () => cursor.u64());
    const type = cursor.u32();
    const offset = cursor.count();
    tensors.push({ name, dims, type, offset, elements: Number(dims.reduce((a, b) => a * b, 1n)) });
  }
  return {
    version,
    alignment,
    metadataEnd,
    fileTypeValueOffset,
    tensors,
    general,
    numbers,
    dataStart: alignUp(cursor.position, alignment),
    fileSize,
  };
}

function readNumber(head: Buffer, at: number, type: number): number {
  if (at + 4 > head.length) throw new OutOfBytes();
  return type === UINT32 ? head.readUInt32LE(at) : type === INT32 ? head.readInt32LE(at) : head.readFloatLE(at);
}

export function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}
