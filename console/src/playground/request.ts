/** The playground's settings and the chat request they make: one builder, so "View code" shows exactly what is sent. */
import type { WireModel } from "../wire.js";

export interface Settings {
  model: string;
  system: string;
  temperature: string;
  topP: string;
  maxTokens: string;
  stop: string;
  seed: string;
  tier: "auto" | "default" | "priority" | "flex";
  jsonMode: "off" | "json_object" | "json_schema";
  schema: string;
  /** Predicted Outputs: the text the answer is expected to be (an edited file, say); empty: none. */
  prediction: string;
}

export interface Turn {
  role: "user" | "assistant";
  content: string;
}

/** The catalog's assistant: what the playground starts on, as the README's first request does. */
export const ASSISTANT_ALIAS = "qwen2.5-coder-0.5b";

/** The model a new playground starts on: the assistant if it is ready, else the first ready model, else the first. */
export function defaultModel(models: readonly WireModel[]): string {
  const ready = models.filter((m) => m.metadata.status === "ready");
  return (ready.find((m) => m.metadata.aliases?.includes(ASSISTANT_ALIAS)) ?? ready[0] ?? models[0])?.id ?? "";
}

export const DEFAULT_SETTINGS: Settings = {
  model: "",
  system: "",
  temperature: "0.7",
  topP: "1",
  maxTokens: "256",
  stop: "",
  seed: "",
  tier: "auto",
  jsonMode: "off",
  schema: '{\n  "type": "object",\n  "properties": { "answer": { "type": "string" } },\n  "required": ["answer"]\n}',
  prediction: "",
};

/** The request body; a setting that does not parse is a message for the user, before anything is sent. */
export function buildRequest(settings: Settings, turns: Turn[], stream: boolean): Record<string, unknown> {
  const messages = [
    ...(settings.system.trim() ? [{ role: "system", content: settings.system }] : []),
    ...turns.map((t) => ({ role: t.role, content: t.content })),
  ];
  const body: Record<string, unknown> = { model: settings.model, messages };
  const number = (text: string, name: string, integer = false) => {
    if (text.trim() === "") return undefined;
    const value = Number(text);
    if (!Number.isFinite(value) || (integer && !Number.isInteger(value)))
      throw new Error(`${name} must be ${integer ? "a whole number" : "a number"}.`);
    return value;
  };
  const put = (name: string, value: unknown) => {
    if (value !== undefined) body[name] = value;
  };
  put("temperature", number(settings.temperature, "temperature"));
  put("top_p", number(settings.topP, "top_p"));
  put("max_tokens", number(settings.maxTokens, "max_tokens", true));
  put("seed", number(settings.seed, "seed", true));
  const stops = settings.stop.split("\n").filter((s) => s !== "");
  if (stops.length) body.stop = stops;
  if (settings.tier !== "auto") body.service_tier = settings.tier;
  if (settings.jsonMode === "json_object") body.response_format = { type: "json_object" };
  if (settings.jsonMode === "json_schema") {
    let schema: unknown;
    try {
      schema = JSON.parse(settings.schema);
    } catch (error) {
      throw new Error(`The JSON schema does not parse: ${(error as Error).message}`);
    }
    body.response_format = { type: "json_schema", json_schema: { name: "answer", schema, strict: true } };
  }
  if (settings.prediction !== "") body.prediction = { type: "content", content: settings.prediction };
  if (stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}
