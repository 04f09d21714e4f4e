/** Reads a safetensors file held in memory: an 8-byte header length, a JSON header, then the raw tensors. */

export interface SafeTensor {
  dtype: string;
  /** PyTorch order: the slowest-varying dimension first. */
  shape: number[];
  data: Buffer;
}

export function readSafetensors(file: Buffer): Map<string, SafeTensor> {
  if (file.length < 8) throw new Error("model.safetensors is too short to be a safetensors file");
  const headerLength = Number(file.readBigUInt64LE(0));
  if (headerLength > file.length - 8) throw new Error("model.safetensors has a header longer than the file");
  const header = JSON.parse(file.toString("utf8", 8, 8 + headerLength)) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const dataStart = 8 + headerLength;
  const tensors = new Map<string, SafeTensor>();
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [begin, end] = entry.data_offsets;
    if (!(begin <= end && dataStart + end <= file.length)) throw new Error(`model.safetensors: tensor ${name} lies outside the file`);
    tensors.set(name, { dtype: entry.dtype, shape: entry.shape, data: file.subarray(dataStart + begin, dataStart + end) });
  }
  return tensors;
}
