import type OpenAI from "openai";
import { toFile } from "openai";
import { SMOLLM2, waitFor } from "./server.js";

/** SmolLM2's prices at the batch tier: the catalog's list prices × the default batch multiplier 0.5. */
export const BATCH_PRICES = { input: "0.01", output: "0.03", cached_input: "0.005" };

export interface ResultLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; request_id: string | null; body: Record<string, unknown> } | null;
  error: { code: string; message: string; line?: number } | null;
}

export const chatLine = (customId: string, content: string, maxTokens = 8) =>
  JSON.stringify({
    custom_id: customId,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: SMOLLM2, messages: [{ role: "user", content }], max_tokens: maxTokens, temperature: 0 },
  });

export async function upload(client: OpenAI, lines: string[], name = "input.jsonl") {
  return client.files.create({ file: await toFile(Buffer.from(`${lines.join("\n")}\n`), name), purpose: "batch" });
}

export async function settled(client: OpenAI, id: string, timeoutMs = 240_000) {
  return waitFor(async () => {
    const batch = await client.batches.retrieve(id);
    if (["completed", "failed", "expired", "cancelled"].includes(batch.status)) return batch;
    await new Promise((resolve) => setTimeout(resolve, 500));
    return undefined;
  }, timeoutMs);
}

export async function resultLines(client: OpenAI, fileId: string | null | undefined): Promise<ResultLine[]> {
  if (!fileId) return [];
  const text = await (await client.files.content(fileId)).text();
  return text
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ResultLine);
}
