import compress from "@fastify/compress";
import { constants as zlibConstants } from "node:zlib";
import type { FastifyInstance } from "fastify";

/**
 * Whether JSON answers are compressed for a client that accepts it: `auto` for every peer but a
 * loopback one, `on` for every peer, `off` never (SWITCHYARD_COMPRESSION).
 */
export type CompressionMode = "auto" | "on" | "off";

/** JSON bodies smaller than this are not compressed (see installCompression). */
const COMPRESS_FROM_BYTES = 32 * 1024;

/**
 * Streams are written to the raw socket (hijacked), so only JSON bodies are ever compressed, at each
 * codec's fastest level: on 256 embeddings (2.06 MB of JSON) brotli 1 took 26 ms against the plugin's
 * quality 4 at 180, gzip 1 39 ms against level 6 at 124, for 6-8% more bytes; the compression threads
 * share the cores with the decode's (README, "Embeddings"). Bodies up to 64 KB are compressed
 * synchronously, off zlib's thread pool. Bodies under COMPRESS_FROM_BYTES go as they are: one
 * embedding's 8.3 KB cost 0.6 ms to compress and 0.8 ms for Node's fetch to decompress, 1.4 ms of an
 * 11 ms request, to save 5 KB.
 *
 * `auto` leaves a loopback peer's answers as they are: no link is faster, so compressing only spends
 * the cores twice (a 256-input embeddings answer, 1.34 MB: 24-36 ms to compress and inflate, about a
 * tenth of the request, where sending it as it is took 4). A proxy on the same host compresses for
 * its own clients, as it would for vLLM or llama-server, which never compress.
 */
export function installCompression(app: FastifyInstance, mode: CompressionMode): void {
  if (mode === "off") return;
  if (mode === "auto")
    app.addHook("onRequest", (request, _reply, done) => {
      // The plugin's own opt-out, read when the answer is sent.
      if (isLoopback(request.socket.remoteAddress)) request.headers["x-no-compression"] = "loopback";
      done();
    });
  void app.register(compress, {
    encodings: ["br", "gzip"],
    threshold: COMPRESS_FROM_BYTES,
    syncThreshold: 64 * 1024,
    zlibOptions: { level: zlibConstants.Z_BEST_SPEED },
    brotliOptions: {
      params: { [zlibConstants.BROTLI_PARAM_MODE]: zlibConstants.BROTLI_MODE_TEXT, [zlibConstants.BROTLI_PARAM_QUALITY]: 1 },
    },
  });
}

/** 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6 (a dual-stack listener's view of an IPv4 peer). */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return v4.startsWith("127.") || address === "::1";
}
