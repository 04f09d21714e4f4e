import assert from "node:assert/strict";
import { openAiError } from "./raw-http.js";
import { SMOLLM2, type ServerAddress } from "./server.js";

/** A one-message chat body for SmolLM2; `extra` adds or overrides fields (max_tokens, stream, model, ...). */
export const ask = (content: string, extra: Record<string, unknown> = {}) => ({
  model: SMOLLM2,
  messages: [{ role: "user", content }],
  ...extra,
});

/** The engine's counts for one served model, as /health reports them. */
export interface ModelHealth {
  running: number;
  waiting: number;
  paused: number;
  preemptions: number;
  engine: { steps: number; sampled_tokens: number; prompt_tokens_computed: number };
}

/** /health's entry for the server's first model. */
export async function health(server: Pick<ServerAddress, "url">): Promise<ModelHealth> {
  const body = (await (await fetch(`${server.url}/health`)).json()) as { models: ModelHealth[] };
  return body.models[0]!;
}

export interface UsageTotals {
  requests: number;
  completion_tokens: number;
  prompt_tokens: number;
  cost_usd: number;
  by_status: Record<string, number>;
}

/** The totals of GET /v1/usage for the account of `key` (the server's own key unless given). */
export async function usageTotals(server: Pick<ServerAddress, "url" | "key">, key = server.key): Promise<UsageTotals> {
  const response = await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
  return ((await response.json()) as { totals: UsageTotals }).totals;
}

/**
 * Asserts `response` is an error of `status` in the OpenAI shape (`{"error": {message, type, param,
 * code}}` and nothing else), with the `expected` fields; returns the error and the body's text.
 */
export async function expectError(
  response: Response,
  status: number,
  expected: { code?: string | null; param?: string | null; type?: string },
): Promise<NonNullable<ReturnType<typeof openAiError>> & { text: string }> {
  const text = await response.text();
  assert.equal(response.status, status, `${response.url}: ${text}`);
  const error = openAiError(text);
  assert.ok(error, `not an OpenAI error body: ${text}`);
  for (const [field, value] of Object.entries(expected)) assert.equal(error[field as keyof typeof error], value, text);
  return { ...error, text };
}
