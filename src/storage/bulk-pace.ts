/**
 * Bulk work on the main thread (a file's chunks, a batch's lines, its result files) shares two
 * cores with the engine's threads, so it is paced: after each slice of `SLICE_MS` of work it rests
 * as long, taking at most about half of one core. Requests are served between slices; the engine's
 * steps keep their cores. Foreground statements (a request's own rows) are not paced.
 */
const SLICE_MS = 4;
let sliceStart = performance.now();

/** Call between units of bulk work; returns at once until the slice is spent, then after a rest. */
export async function bulkPace(): Promise<void> {
  const now = performance.now();
  const spent = now - sliceStart;
  if (spent < SLICE_MS) return;
  await new Promise<void>((resolve) => setTimeout(resolve, Math.min(spent, 2 * SLICE_MS)));
  sliceStart = performance.now();
}
