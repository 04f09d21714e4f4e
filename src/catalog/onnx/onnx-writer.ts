/**
 * An ONNX ModelProto from a graph described as plain data: the message types and field numbers of
 * onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto), the
 * subset a feed-forward graph with initializers uses. Weights go in `raw_data` (little-endian).
 */
import { ProtoWriter } from "./protobuf.js";

/** TensorProto.DataType. */
export const OnnxType = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7 } as const;
export type OnnxElementType = (typeof OnnxType)[keyof typeof OnnxType];

export type OnnxAttribute = { int: number } | { float: number } | { ints: number[] } | { string: string };

export interface OnnxNode {
  op: string;
  inputs: string[];
  outputs: string[];
  /** `com.microsoft` for ONNX Runtime's contrib operators; the standard domain otherwise. */
  domain?: string;
  attributes?: Record<string, OnnxAttribute>;
}

export interface OnnxInitializer {
  name: string;
  type: OnnxElementType;
  dims: number[];
  data: Buffer;
}

/** A graph input or output: each dimension a size, or a name for a size given at run time. */
export interface OnnxValueInfo {
  name: string;
  type: OnnxElementType;
  shape: Array<number | string>;
}

export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  initializers: OnnxInitializer[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
}

/** IR version 8 (ONNX 1.10+): read by every ONNX Runtime from 1.10 on. */
const IR_VERSION = 8;
/** AttributeProto.AttributeType. */
const ATTRIBUTE_TYPE = { float: 1, int: 2, string: 3, ints: 7 } as const;

function attribute(name: string, value: OnnxAttribute): ProtoWriter {
  const out = new ProtoWriter().string(1, name);
  if ("float" in value) return out.float(2, value.float).varint(20, ATTRIBUTE_TYPE.float);
  if ("int" in value) return out.varint(3, value.int).varint(20, ATTRIBUTE_TYPE.int);
  if ("string" in value) return out.string(4, value.string).varint(20, ATTRIBUTE_TYPE.string);
  return out.packedVarints(8, value.ints).varint(20, ATTRIBUTE_TYPE.ints);
}

function node(spec: OnnxNode, index: number): ProtoWriter {
  const out = new ProtoWriter();
  for (const input of spec.inputs) out.string(1, input);
  for (const output of spec.outputs) out.string(2, output);
  out.string(3, `${spec.op}_${index}`).string(4, spec.op);
  for (const [name, value] of Object.entries(spec.attributes ?? {})) out.message(5, attribute(name, value));
  if (spec.domain) out.string(7, spec.domain);
  return out;
}

function tensor(spec: OnnxInitializer): ProtoWriter {
  return new ProtoWriter().packedVarints(1, spec.dims).varint(2, spec.type).string(8, spec.name).bytes(9, spec.data);
}

function valueInfo(spec: OnnxValueInfo): ProtoWriter {
  const shape = new ProtoWriter();
  for (const dim of spec.shape) {
    shape.message(1, typeof dim === "number" ? new ProtoWriter().varint(1, dim) : new ProtoWriter().string(2, dim));
  }
  const tensorType = new ProtoWriter().varint(1, spec.type).message(2, shape);
  return new ProtoWriter().string(1, spec.name).message(2, new ProtoWriter().message(1, tensorType));
}

export function encodeOnnxModel(graph: OnnxGraph, opsets: Record<string, number>, producer: string): Buffer {
  const body = new ProtoWriter();
  graph.nodes.forEach((spec, index) => body.message(1, node(spec, index)));
  body.string(2, graph.name);
  for (const spec of graph.initializers) body.message(5, tensor(spec));
  for (const spec of graph.inputs) body.message(11, valueInfo(spec));
  for (const spec of graph.outputs) body.message(12, valueInfo(spec));
  const model = new ProtoWriter().varint(1, IR_VERSION).string(2, producer);
  for (const [domain, version] of Object.entries(opsets)) model.message(8, new ProtoWriter().string(1, domain).varint(2, version));
  return model.message(7, body).toBuffer();
}
