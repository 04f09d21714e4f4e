/**
 * LoRA adapters an account uploads (`POST /v1/adapters`): private to the account, served as models
 * of their own (`<account name>/<name>`) on their base model's engine, billed at the base's prices.
 * This module (src/adapters) knows nothing of HTTP or of llama.cpp: it checks and converts the files
 * through catalog/, loads them through the base's Backend, and is driven by the routes through
 * AdapterService.
 */
import type { FormPart } from "../protocol/form-parts.js";
import type { Principal } from "../protocol/principal.js";

/** `failed`: it could not be loaded again at a start (the reason in `failReason`); it stays listed until deleted. */
export type AdapterStatus = "ready" | "failed";

/** What was uploaded: a PEFT folder's two files, or one GGUF LoRA. */
export type AdapterFormat = "peft" | "gguf";

export interface Adapter {
  id: string;
  accountId: string;
  name: string;
  /** `<account name>/<name>`: what requests name as `model`. */
  modelId: string;
  /** The catalog model it runs on (its id, not an alias). */
  baseModel: string;
  format: AdapterFormat;
  /** The served GGUF LoRA's size and hash (a PEFT upload's after conversion). */
  bytes: number;
  sha256: string;
  status: AdapterStatus;
  failReason: string | null;
  createdAt: Date;
}

/**
 * Caps on uploads, in one place (the server's settings fill them: SWITCHYARD_ADAPTER_MAX_BYTES,
 * SWITCHYARD_ADAPTERS_PER_ACCOUNT, SWITCHYARD_ADAPTER_LOADED_BYTES): the routes and the manager check against them.
 */
export interface AdapterLimits {
  /** One upload's files together, in bytes (413 beyond). */
  maxBytes: number;
  /** Adapters one account keeps at once (deleted ones aside). */
  perAccount: number;
  /**
   * Bytes of uploaded adapters this process may hold loaded, every account together; a deleted one
   * counts until its tensors are freed (once the requests running under it end).
   */
  loadedBytes: number;
  /** Uploads one account sends at once, and this process reads at once (each holds a temp dir and, converting, memory). */
  uploadsPerAccount: number;
  uploadsInFlight: number;
}

export const DEFAULT_ADAPTER_LIMITS: AdapterLimits = {
  maxBytes: 256 * 1024 * 1024,
  perAccount: 8,
  loadedBytes: 2 * 1024 * 1024 * 1024,
  uploadsPerAccount: 1,
  uploadsInFlight: 2,
};

/** Whose adapters: only ever the calling key's own account. */
export type AdapterAccount = Pick<Principal, "accountId" | "accountName">;

/** Who uploads or deletes one: a key with the manage-deployments right, its models and its limits. */
export type AdapterCaller = Pick<Principal, "accountId" | "accountName" | "keyId" | "allowedModels" | "limits">;

/**
 * The form's file fields: a PEFT adapter as `save_pretrained` writes it, or one GGUF LoRA
 * (llama.cpp's convert_lora_to_gguf.py output); with the `base_model` and `name` fields.
 */
export const ADAPTER_FILE_FIELDS = ["adapter_config", "adapter_model", "adapter_gguf"] as const;

export interface AdapterService {
  /** Reads the form (streamed to a temp dir), checks and converts the adapter, loads it, and keeps it. */
  upload(caller: AdapterCaller, parts: AsyncIterable<FormPart>): Promise<Adapter>;
  list(caller: AdapterAccount): Promise<Adapter[]>;
  /** null for an unknown id, a deleted one, and another account's: the routes answer all with the same 404. */
  get(caller: AdapterAccount, id: string): Promise<Adapter | null>;
  /** New requests naming it get 404 at once; those running finish (and are billed); its memory is freed after. */
  remove(caller: AdapterCaller, id: string): Promise<Adapter | null>;
}
