import { randomPrompts } from "./datasets.js";
import type { Target } from "./client-stream.js";

/** A batch kept running underneath a scenario: the tiers' latency must not move because of it. */
export interface BackgroundBatch {
  lines: number;
  outputTokens: number;
}

export interface RunningBatch {
  /** Cancels the batch (lines running finish) and says how many lines it answered meanwhile. */
  stop(): Promise<{ id: string; completed: number; total: number }>;
}

/** Uploads a JSONL file of `lines` chat requests and starts a batch on it, through the Files and Batch APIs. */
export async function startBackgroundBatch(target: Target, spec: BackgroundBatch, seed: number): Promise<RunningBatch> {
  const prompts = randomPrompts(spec.lines, 128, seed);
  const jsonl = prompts
    .map((messages, i) =>
      JSON.stringify({
        custom_id: `bg-${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: target.model, messages, max_tokens: spec.outputTokens, temperature: 0 },
      }),
    )
    .join("\n");
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([jsonl]), "background.jsonl");
  const file = await api<{ id: string }>(target, "/files", { method: "POST", body: form });
  const batch = await api<{ id: string }>(target, "/batches", {
    method: "POST",
    body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
    headers: { "content-type": "application/json" },
  });
  return {
    async stop() {
      const cancelled = await api<{ request_counts: { completed: number; total: number } }>(target, `/batches/${batch.id}/cancel`, {
        method: "POST",
      }).catch(() => api<{ request_counts: { completed: number; total: number } }>(target, `/batches/${batch.id}`, {}));
      return { id: batch.id, ...cancelled.request_counts };
    },
  };
}

async function api<T>(target: Target, path: string, init: RequestInit): Promise<T> {
  const response = await fetch(`${target.baseURL}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${target.key}`, ...(init.headers as Record<string, string> | undefined) },
  });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}
