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
  if (typeof header !== "object" || header === null || Array.isArray(header))
    throw new Error("model.safetensors: the header is not a JSON object");
  const dataStart = 8 + headerLength;
  const tensors = new Map<string, SafeTensor>();
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    // An uploaded file's header is anyone's JSON: each entry must have the shape the format defines.
    const { dtype, shape, data_offsets: offsets } = (entry ?? {}) as Partial<typeof entry>;
    if (typeof dtype !== "string" || !Array.isArray(shape) || !shape.every((n) => Number.isSafeInteger(n) && n >= 0))
      throw new Error(`model.safetensors: tensor ${name} has no valid dtype and shape`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((n) => Number.isSafeInteger(n) && n >= 0))
      throw new Error(`model.safetensors: tensor ${name} has no valid data_offsets`);
    const [begin, end] = offsets as [number, number];
    if (!(begin <= end && dataStart + end <= file.length)) throw new Error(`model.safetensors: tensor ${name} lies outside the file`);
    tensors.set(name, { dtype, shape, data: file.subarray(dataStart + begin, dataStart + end) });
  }
  checkDisjoint(header as Record<string, { data_offsets: [number, number] }>, tensors);
  return tensors;
}

/** No two tensors share bytes: the format lays them end to end, and overlapping ones would read each other's values. */
function checkDisjoint(header: Record<string, { data_offsets: [number, number] }>, tensors: ReadonlyMap<string, SafeTensor>): void {
  const ranges = [...tensors.keys()]
    .map((name) => ({ name, begin: header[name]!.data_offsets[0], end: header[name]!.data_offsets[1] }))
    .filter((range) => range.end > range.begin)
    .sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < ranges.length; i++)
    if (ranges[i]!.begin < ranges[i - 1]!.end)
      throw new Error(`model.safetensors: tensors ${ranges[i - 1]!.name} and ${ranges[i]!.name} overlap (data_offsets)`);
}
