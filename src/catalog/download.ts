/** HTTP(S) downloads through Node's global fetch, streamed to disk and hashed on the way. */
import { createWriteStream } from "node:fs";
import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { pipeline } from "node:stream/promises";
import { createDigestingStream } from "./hash.js";

/** A download that delivers nothing for this long is treated as dead rather than waited on forever. */
const IDLE_TIMEOUT_MS = 60_000;
const JSON_TIMEOUT_MS = 30_000;

/** GETs a JSON document; returns null on 404 so the caller can say what was not found. */
export async function fetchJson(url: string): Promise<unknown | null> {
  const response = await fetchOrExplain(url, AbortSignal.timeout(JSON_TIMEOUT_MS));
  if (response.status === 404) {
    await response.body?.cancel();
    return null;
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`GET ${url} returned HTTP ${response.status} ${response.statusText}`);
  }
  try {
    return await response.json();
  } catch (err) {
    throw new Error(`GET ${url} did not return valid JSON: ${(err as Error).message}`, { cause: err });
  }
}

export interface DownloadOptions {
  /** Called as bytes arrive with the running total and the expected total (0 when unknown). */
  onBytes?: (receivedBytes: number, totalBytes: number) => void;
  /** Size announced by the index; a response of another length is rejected. */
  expectedSize?: number;
}

/** Streams `url` into `destPath` (which the caller owns and cleans up) and returns its size and sha256. */
export async function downloadToFile(
  url: string,
  destPath: string,
  options: DownloadOptions = {},
): Promise<{ bytes: number; sha256: string }> {
  const idle = new AbortController();
  let idleTimer = setTimeout(() => idle.abort(), IDLE_TIMEOUT_MS);
  const resetIdleTimer = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => idle.abort(), IDLE_TIMEOUT_MS);
  };
  try {
    const response = await fetchOrExplain(url, idle.signal);
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw new Error(`GET ${url} returned HTTP ${response.status} ${response.statusText}`);
    }
    const totalBytes = options.expectedSize ?? Number(response.headers.get("content-length") ?? 0);
    options.onBytes?.(0, totalBytes);
    const digest = createDigestingStream((received) => {
      resetIdleTimer();
      options.onBytes?.(received, totalBytes);
    });
    const body = Readable.fromWeb(response.body as unknown as NodeReadableStream<Uint8Array>);
    try {
      await pipeline(body, digest.stream, createWriteStream(destPath));
    } catch (err) {
      if (idle.signal.aborted) throw new Error(`download of ${url} stalled: no data for ${IDLE_TIMEOUT_MS / 1000} s`, { cause: err });
      throw new Error(`download of ${url} failed: ${describeNetworkError(err)}`, { cause: err });
    }
    const result = digest.result();
    if (options.expectedSize !== undefined && result.bytes !== options.expectedSize) {
      throw new Error(`download of ${url} is ${result.bytes} bytes, but the index says ${options.expectedSize} bytes`);
    }
    return result;
  } finally {
    clearTimeout(idleTimer);
  }
}

/** fetch() only says "fetch failed"; the useful part (ECONNREFUSED, ENOTFOUND, certificate...) is in its cause. */
async function fetchOrExplain(url: string, signal: AbortSignal): Promise<Response> {
  try {
    return await fetch(url, { signal, redirect: "follow" });
  } catch (err) {
    throw new Error(`network error on GET ${url}: ${describeNetworkError(err)}`, { cause: err });
  }
}

function describeNetworkError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.name === "TimeoutError" || err.name === "AbortError") return "timed out";
  const cause = err.cause as { code?: string; message?: string } | undefined;
  if (cause?.code && cause.message) return `${cause.code}: ${cause.message}`;
  return cause?.message ?? err.message;
}
