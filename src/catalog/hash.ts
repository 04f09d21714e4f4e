/** SHA-256 helpers that stream, so a multi-hundred-megabyte model never sits in memory. */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { Transform } from "node:stream";

export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

export interface DigestingStream {
  /** Put it in a pipeline between the source and the file; it passes every byte through unchanged. */
  stream: Transform;
  /** Call once the pipeline has finished. */
  result(): { bytes: number; sha256: string };
}

/** Hashes and counts what flows through it, so a file is verified in the same pass that writes it. */
export function createDigestingStream(onBytes?: (totalSoFar: number) => void): DigestingStream {
  const hash = createHash("sha256");
  let bytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      bytes += chunk.length;
      onBytes?.(bytes);
      callback(null, chunk);
    },
  });
  return { stream, result: () => ({ bytes, sha256: hash.digest("hex") }) };
}
