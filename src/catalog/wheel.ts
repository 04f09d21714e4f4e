/**
 * Reading Python wheels (zip files) with yauzl: list members, read the small text ones, and stream the big
 * ones to disk while hashing them. Also parses the two checksum formats wheels carry (RECORD, SHA256SUMS).
 */
import { createWriteStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import yauzl from "yauzl";
import type { Entry, ZipFile } from "yauzl";
import { createDigestingStream } from "./hash.js";

export interface Wheel {
  path: string;
  zip: ZipFile;
  /** Member name (forward slashes, as stored) to its zip entry; directories left out. */
  members: Map<string, Entry>;
}

/** Opens a wheel, reads its central directory, runs `use`, and always closes the file. */
export async function withWheel<T>(path: string, use: (wheel: Wheel) => Promise<T>): Promise<T> {
  let zip: ZipFile;
  try {
    // autoClose off: entries are all listed first and streamed afterwards, on demand.
    zip = await yauzl.openPromise(path, { lazyEntries: true, autoClose: false });
  } catch (err) {
    throw new Error(`cannot open wheel ${path} as a zip file: ${(err as Error).message}`, { cause: err });
  }
  try {
    const members = new Map<string, Entry>();
    for await (const entry of zip.eachEntry()) {
      if (!entry.fileName.endsWith("/")) members.set(entry.fileName, entry);
    }
    return await use({ path, zip, members });
  } finally {
    zip.close();
  }
}

function requireMember(wheel: Wheel, name: string): Entry {
  const entry = wheel.members.get(name);
  if (!entry) throw new Error(`wheel ${wheel.path} has no member ${name}`);
  return entry;
}

/** For checksum and metadata files only: refuses anything big rather than buffering it. */
export async function readMemberText(wheel: Wheel, name: string, maxBytes = 4 << 20): Promise<string> {
  const entry = requireMember(wheel, name);
  if (entry.uncompressedSize > maxBytes)
    throw new Error(`wheel member ${name} is ${entry.uncompressedSize} bytes, too big to read as text`);
  const chunks: Buffer[] = [];
  for await (const chunk of await wheel.zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Streams one member into `destPath` (yauzl checks its size; we hash it) and returns size and sha256. */
export async function extractMember(wheel: Wheel, name: string, destPath: string): Promise<{ bytes: number; sha256: string }> {
  const entry = requireMember(wheel, name);
  const digest = createDigestingStream();
  await pipeline(await wheel.zip.openReadStreamPromise(entry), digest.stream, createWriteStream(destPath));
  return digest.result();
}

/** The wheel's `<name>-<version>.dist-info/<file>` member, e.g. RECORD or METADATA. */
export function findDistInfoMember(wheel: Wheel, file: string): string | undefined {
  return [...wheel.members.keys()].find(
    (name) => /^[^/]+\.dist-info\//.test(name) && name.endsWith(`.dist-info/${file}`) && name.split("/").length === 2,
  );
}

export interface RecordLine {
  sha256Hex: string;
  size: number;
}

/** Parses RECORD (`path,sha256=<urlsafe base64, no padding>,size` per line; CSV quoting for odd paths). */
export function parseRecord(text: string): Map<string, RecordLine> {
  const records = new Map<string, RecordLine>();
  for (const line of text.split(/\r?\n/)) {
    if (!line.trim()) continue;
    const [path, hash, size] = parseCsvLine(line);
    if (!path || !hash?.startsWith("sha256=") || !size) continue; // RECORD lists itself without a hash
    records.set(path, { sha256Hex: Buffer.from(hash.slice("sha256=".length), "base64url").toString("hex"), size: Number(size) });
  }
  return records;
}

function parseCsvLine(line: string): string[] {
  const fields: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const char = line[i]!;
    if (quoted) {
      if (char === '"' && line[i + 1] === '"') {
        field += '"';
        i++;
      } else if (char === '"') quoted = false;
      else field += char;
    } else if (char === '"') quoted = true;
    else if (char === ",") {
      fields.push(field);
      field = "";
    } else field += char;
  }
  fields.push(field);
  return fields;
}

/** Parses `sha256sum` output: `<64 hex>  <name>` (or `<hex> *<name>` in binary mode) per line; name to hex. */
export function parseSha256Sums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^([0-9a-fA-F]{64}) [ *](.+)$/.exec(line.trim());
    if (match) sums.set(match[2]!.trim(), match[1]!.toLowerCase());
  }
  return sums;
}

/** `Requires-Dist:` values from a wheel's METADATA (RFC 822 style headers before the first blank line). */
export function parseRequiresDist(metadata: string): string[] {
  const headers = metadata.split(/\r?\n\r?\n/, 1)[0] ?? "";
  return headers
    .split(/\r?\n/)
    .filter((line) => /^Requires-Dist:/i.test(line))
    .map((line) => line.slice(line.indexOf(":") + 1).trim());
}
