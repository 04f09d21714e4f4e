/**
 * An upload's form read into a temp dir: each file streamed to disk as it arrives, the files
 * together capped at the server's limit, the text fields checked as they arrive (a wrong name or
 * base model is refused before the files are read, when the client sends the fields first).
 */
import { createWriteStream } from "node:fs";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { AdapterUpload } from "../catalog/adapter-file.js";
import { InvalidRequest, ServiceError } from "../errors.js";
import type { FormPart } from "../protocol/form-parts.js";
import type { ADAPTER_FILE_FIELDS, AdapterFormat } from "./types.js";

/** Where each file field lands in the temp dir: the PEFT files under the names the converter reads. */
const FILE_NAMES: Record<(typeof ADAPTER_FILE_FIELDS)[number], string> = {
  adapter_config: "adapter_config.json",
  adapter_model: "adapter_model.safetensors",
  adapter_gguf: "adapter.gguf",
};

/** adapter_config.json is a few hundred bytes; a large one would only cost a long JSON.parse on the event loop. */
const MAX_CONFIG_BYTES = 1024 * 1024;

export interface ReceivedUpload {
  baseModel: string;
  name: string;
  format: AdapterFormat;
  upload: AdapterUpload;
  /** The files' bytes together. */
  bytes: number;
}

/**
 * Reads the form into `dir`. `checkField` sees `base_model` and `name` as they arrive and throws to
 * refuse them; fields other than those are refused too (a typo would otherwise pass unseen).
 */
export async function receiveUpload(
  parts: AsyncIterable<FormPart>,
  dir: string,
  maxBytes: number,
  checkField: (field: "base_model" | "name", value: string) => void,
): Promise<ReceivedUpload> {
  const fields: Partial<Record<"base_model" | "name", string>> = {};
  const files = new Set<string>();
  let bytes = 0;
  for await (const part of parts) {
    if ("field" in part) {
      if (part.field !== "base_model" && part.field !== "name") throw unknownField(part.field);
      if (fields[part.field] !== undefined)
        throw new InvalidRequest(`The field '${part.field}' was sent twice.`, part.field, "invalid_value");
      checkField(part.field, part.value);
      fields[part.field] = part.value;
      continue;
    }
    const field = part.file as (typeof ADAPTER_FILE_FIELDS)[number];
    if (files.has(field)) throw new InvalidRequest(`The file '${field}' was sent twice.`, field, "invalid_value");
    files.add(field);
    const configCap = field === "adapter_config" && MAX_CONFIG_BYTES < maxBytes - bytes;
    const refusal = () => (configCap ? configTooLarge() : tooLarge(field, maxBytes));
    bytes += await writeCapped(part.bytes, join(dir, FILE_NAMES[field]), configCap ? MAX_CONFIG_BYTES : maxBytes - bytes, refusal);
  }
  return { ...required(fields), ...format(files, dir), bytes };
}

/** Streams `bytes` to `path`, throwing `refusal()` once more than `cap` bytes came; returns how many. */
async function writeCapped(bytes: AsyncIterable<Buffer>, path: string, cap: number, refusal: () => Error): Promise<number> {
  let written = 0;
  const counted = async function* () {
    for await (const chunk of bytes) {
      written += chunk.byteLength;
      if (written > cap) throw refusal();
      yield chunk;
    }
  };
  await pipeline(counted, createWriteStream(path, { flags: "wx", mode: 0o600 }));
  return written;
}

function required(fields: Partial<Record<"base_model" | "name", string>>): { baseModel: string; name: string } {
  for (const field of ["base_model", "name"] as const)
    if (fields[field] === undefined)
      throw new InvalidRequest(`Missing required parameter: '${field}'.`, field, "missing_required_parameter");
  return { baseModel: fields.base_model!, name: fields.name! };
}

/** Exactly one of: the PEFT pair, or one GGUF LoRA. */
function format(files: ReadonlySet<string>, dir: string): { format: AdapterFormat; upload: AdapterUpload } {
  const peft = files.has("adapter_config") || files.has("adapter_model");
  const gguf = files.has("adapter_gguf");
  if (peft && gguf)
    throw new InvalidRequest(
      "Send either a PEFT adapter ('adapter_config' and 'adapter_model') or a GGUF LoRA ('adapter_gguf'), not both.",
      "adapter_gguf",
      "invalid_value",
    );
  if (gguf) return { format: "gguf", upload: { format: "gguf", path: join(dir, FILE_NAMES.adapter_gguf) } };
  const missing = ["adapter_config", "adapter_model"].find((field) => !files.has(field));
  if (missing) {
    const why = peft
      ? "a PEFT adapter needs both 'adapter_config' (adapter_config.json) and 'adapter_model' (adapter_model.safetensors)"
      : "send a PEFT adapter ('adapter_config' and 'adapter_model') or a GGUF LoRA ('adapter_gguf')";
    throw new InvalidRequest(`Missing required file '${missing}': ${why}.`, missing, "missing_required_parameter");
  }
  return { format: "peft", upload: { format: "peft", dir } };
}

function unknownField(field: string): InvalidRequest {
  const shown = field.length > 40 ? `${field.slice(0, 40)}...` : field;
  return new InvalidRequest(
    `Unknown field '${shown}'. The form takes 'base_model', 'name', and the files 'adapter_config' and 'adapter_model' (PEFT) or 'adapter_gguf'.`,
    null,
    "unknown_parameter",
  );
}

function configTooLarge(): InvalidRequest {
  return new InvalidRequest(
    `adapter_config.json is larger than ${MAX_CONFIG_BYTES} bytes; it is not a PEFT adapter's config.`,
    "adapter_config",
    "invalid_value",
  );
}

function tooLarge(field: string, maxBytes: number): ServiceError {
  return new ServiceError(
    413,
    "invalid_request_error",
    `The adapter's files are larger than ${maxBytes} bytes together, the most this server takes in one upload.`,
    "adapter_too_large",
    field,
  );
}
