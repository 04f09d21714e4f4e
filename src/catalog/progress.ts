/**
 * What `ensureModels` shows while pulling: one cli-progress bar per downloaded file on an interactive stderr,
 * and on a non-interactive one (logs, CI) only a one-line summary per model, so logs are not flooded.
 */
import cliProgress from "cli-progress";
import { formatBytes } from "./format.js";
import type { PulledModel, PullProgress } from "./types.js";

export interface PullReporter {
  onProgress(progress: PullProgress): void;
  modelDone(model: PulledModel, seconds: number): void;
  stop(): void;
}

export function createPullReporter(stream: NodeJS.WriteStream = process.stderr): PullReporter {
  const multibar = stream.isTTY
    ? new cliProgress.MultiBar(
        {
          stream,
          format: " {file} [{bar}] {percentage}% | {received}/{size} | ETA {eta_formatted}",
          hideCursor: true,
          clearOnComplete: false,
          autopadding: true,
        },
        cliProgress.Presets.shades_classic,
      )
    : null;
  const bars = new Map<string, cliProgress.SingleBar>();

  return {
    onProgress({ model, file, receivedBytes, totalBytes }) {
      if (!multibar) return;
      const payload = { file, received: formatBytes(receivedBytes), size: formatBytes(totalBytes) };
      const key = `${model}\n${file}`;
      const bar = bars.get(key);
      if (bar) bar.update(receivedBytes, payload);
      else bars.set(key, multibar.create(Math.max(totalBytes, 1), receivedBytes, payload));
    },
    modelDone(model, seconds) {
      const reencoded = model.path === model.published.path ? "" : `; serving its re-encoding ${model.path} (${formatBytes(model.bytes)})`;
      const line = model.pulled
        ? `${model.id}: pulled ${formatBytes(model.published.bytes)} in ${seconds.toFixed(1)} s -> ${model.published.path}${reencoded}`
        : `${model.id}: ready (${formatBytes(model.bytes)}, ${model.path})`;
      if (multibar) multibar.log(`${line}\n`);
      else stream.write(`${line}\n`);
    },
    stop() {
      multibar?.stop();
    },
  };
}
