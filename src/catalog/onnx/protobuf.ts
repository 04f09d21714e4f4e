/**
 * The few protobuf encodings an ONNX model needs, written by hand rather than through a schema
 * library: varints, length-delimited fields (strings, bytes, nested messages) and packed floats.
 * A message is built as a list of byte chunks and joined once, so a 90 MB weight is copied once.
 */

const WIRE_VARINT = 0;
const WIRE_LENGTH_DELIMITED = 2;

export class ProtoWriter {
  private readonly chunks: Buffer[] = [];
  private length = 0;

  get byteLength(): number {
    return this.length;
  }

  /** An int32, int64 or enum field (negative values as ten-byte two's complement, as protobuf does). */
  varint(field: number, value: number | bigint): this {
    this.tag(field, WIRE_VARINT);
    return this.rawVarint(BigInt(value));
  }

  string(field: number, value: string): this {
    return this.bytes(field, Buffer.from(value, "utf8"));
  }

  bytes(field: number, value: Buffer): this {
    this.tag(field, WIRE_LENGTH_DELIMITED);
    this.rawVarint(BigInt(value.byteLength));
    return this.push(value);
  }

  message(field: number, value: ProtoWriter): this {
    this.tag(field, WIRE_LENGTH_DELIMITED);
    this.rawVarint(BigInt(value.byteLength));
    for (const chunk of value.chunks) this.push(chunk);
    return this;
  }

  /** A 32-bit float field (wire type 5, little-endian). */
  float(field: number, value: number): this {
    this.tag(field, 5);
    const bytes = Buffer.alloc(4);
    bytes.writeFloatLE(value);
    return this.push(bytes);
  }

  /** A repeated int64 field, packed (proto3's default encoding, which every parser reads). */
  packedVarints(field: number, values: readonly (number | bigint)[]): this {
    const inner = new ProtoWriter();
    for (const value of values) inner.rawVarint(BigInt(value));
    this.tag(field, WIRE_LENGTH_DELIMITED);
    this.rawVarint(BigInt(inner.byteLength));
    for (const chunk of inner.chunks) this.push(chunk);
    return this;
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }

  private tag(field: number, wireType: number): void {
    this.rawVarint(BigInt((field << 3) | wireType));
  }

  private rawVarint(value: bigint): this {
    let rest = BigInt.asUintN(64, value);
    const bytes: number[] = [];
    do {
      const low = Number(rest & 0x7fn);
      rest >>= 7n;
      bytes.push(rest > 0n ? low | 0x80 : low);
    } while (rest > 0n);
    return this.push(Buffer.from(bytes));
  }

  private push(chunk: Buffer): this {
    this.chunks.push(chunk);
    this.length += chunk.byteLength;
    return this;
  }
}
