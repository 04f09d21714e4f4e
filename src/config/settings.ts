import { z } from "zod";

/**
 * Server settings, from flags over environment over defaults, validated once at start.
 * Every knob is data here; nothing else in the code reads process.env for serving.
 */

/**
 * How long an accepted key is used without a lookup (key-cache.ts). On the embedded database every
 * change to a key passes through this process, which drops its cache at once, so only the period
 * bounds a lookup per request: a key used less often than the period paid one each time (about 1 ms
 * of the database thread on a request that arrived more than a second after the last). On a shared
 * PostgreSQL another server may revoke a key: the period is how late this one sees it.
 */
const KEY_CACHE_MS_EMBEDDED = 600_000;
const KEY_CACHE_MS_SHARED = 1_000;

const settingsSchema = z.object({
  host: z.string().min(1),
  port: z.coerce.number().int().min(0).max(65535),
  /** Largest request body accepted, in bytes (413 beyond). */
  bodyLimit: z.coerce.number().int().min(1024),
  /** Levels of objects and arrays a JSON body may nest (400 nesting_too_deep beyond): every walk over it stays far from the stack's limit. */
  maxJsonDepth: z.coerce.number().int().min(16).max(1000),
  /** Time to receive a whole request, headers and body (ms); 408 beyond. */
  requestTimeoutMs: z.coerce.number().int().min(100),
  /** On SIGTERM/SIGINT, how long running requests may finish before they are ended with an error (ms). */
  drainTimeoutMs: z.coerce.number().int().min(0).max(3_600_000),
  /** Open connections per client IP that have not made an authenticated request yet. */
  maxUnauthenticatedPerIp: z.coerce.number().int().min(1),
  /** Open connections in all, per key and per account, and the reserve no key may take; resolved against the open-file limit by connectionCaps. */
  connections: z.object({
    total: z.coerce.number().int().min(16).optional(),
    reserve: z.coerce.number().int().min(1).optional(),
    perKey: z.coerce.number().int().min(1),
    perAccount: z.coerce.number().int().min(1),
    /** How long a kept-alive connection may sit idle between requests before it is closed (ms). */
    keepAliveTimeoutMs: z.coerce.number().int().min(100).max(3_600_000),
  }),
  /** Sequences decoded together per model. */
  parallel: z.coerce.number().int().min(1).max(256),
  /** Requests that may wait for a sequence per model before 429. */
  maxWaiting: z.coerce.number().int().min(0),
  /** CPU threads for llama.cpp per model; 0 means one per available core. */
  threads: z.coerce.number().int().min(0),
  /** Independent step loops per model, each a context of threads/shards threads; 0 means one per thread. */
  shards: z.coerce.number().int().min(0),
  /** How long a flex request may wait for spare capacity before a 429 resource_unavailable (ms). */
  flexMaxWaitMs: z.coerce.number().int().min(0),
  /** How long a request may hold a sequence without progress (paused or stuck) before it is ended (ms). */
  stallTimeoutMs: z.coerce.number().int().min(100),
  /** How long an accepted key is remembered without a lookup (ms; 0: looked up every request; default by database, above). See accounts/key-cache.ts. */
  keyCacheMs: z.coerce.number().int().min(0).max(KEY_CACHE_MS_EMBEDDED),
  /** Unsent bytes a streamed response may buffer before its generation pauses (at least Node's 16 KiB write buffer). */
  streamBufferBytes: z.coerce
    .number()
    .int()
    .min(16 * 1024),
  /** How long a streamed response may stay paused on a full buffer before it is ended (ms). */
  streamPauseTimeoutMs: z.coerce.number().int().min(100),
  /** How long a paused stream's generation keeps its sequence before it is preempted, to resume when its client reads (ms). */
  streamPauseGraceMs: z.coerce.number().int().min(0).max(3_600_000),
  /** The access log's one line per request: at `debug` (written only at that log level), at `info`, or `off` (observability/access-log.ts). */
  accessLog: z.enum(["off", "debug", "info"]),
  /** Reuse cached prompt prefixes within an account. */
  prefixCache: z.boolean(),
  /** Speculative decoding in the embedded engine: `auto` drafts where its cost model says it pays; `off` never. */
  speculation: z.enum(["auto", "off"]),
  /** What runs a sentence-embedding model: ONNX Runtime on its ONNX graph, or llama.cpp on its GGUF (docs/api/embeddings.md). */
  embeddingRuntime: z.enum(["onnx", "llama"]),
  /**
   * Shards with room for every adapter (model-host.ts `adapterRoom`): `auto` for a model the catalog
   * has adapters of, `on` for every local chat model (uploads too), `off` never.
   */
  adapterRoom: z.enum(["auto", "on", "off"]),
  /** Tokens evaluated per shard's step (decode tokens first, prompt chunks in the rest). */
  stepTokens: z.coerce.number().int().min(16),
  /** Per-tier service targets (ms) the step budget keeps: time to first token and between tokens. */
  targets: z.object({
    priority: z.object({ ttftMs: z.coerce.number().int().min(1), itlMs: z.coerce.number().int().min(1) }),
    standard: z.object({ ttftMs: z.coerce.number().int().min(1), itlMs: z.coerce.number().int().min(1) }),
  }),
  /** Cap on one request's context window (tokens); each sequence holds a KV stream of this many cells. */
  maxContext: z.coerce.number().int().min(512),
  /** Serve only these catalog ids (empty: all). */
  models: z.array(z.string()),
  databaseUrl: z.string().optional(),
  /** SWITCHYARD_ADMIN_KEY: long enough that guessing it is hopeless. */
  adminKey: z.string().min(32, "must be at least 32 characters").optional(),
  /** Failed admin-key attempts per client IP within adminLockoutMs before that IP is locked out for adminLockoutMs. */
  adminMaxFailures: z.coerce.number().int().min(1),
  adminLockoutMs: z.coerce.number().int().min(1000),
  /** The key a gateway presents to a `serve --worker` (SWITCHYARD_WORKER_KEY). */
  workerKey: z.string().min(16, "must be at least 16 characters").optional(),
  /** Origins browsers may call the API from; `*` allows any (keys travel in headers, not cookies). */
  corsOrigins: z.array(z.string()).min(1),
  /** Which peers' JSON answers are compressed when they accept it: `auto` all but loopback ones (http/compression.ts). */
  compression: z.enum(["auto", "on", "off"]),
  /** Dedicated deployments: heartbeat/autoscale period, billed segment length, idle time before an extra instance stops. */
  deployments: z.object({
    tickMs: z.coerce.number().int().min(100),
    segmentMs: z.coerce.number().int().min(1000),
    idleMs: z.coerce.number().int().min(0),
  }),
  /** What one account may deploy: the clamps live here, the checks in deployments/ (DeploymentLimits). */
  deploymentLimits: z.object({
    maxInstances: z.literal(4),
    maxBatchSize: z.coerce.number().int().min(1).max(256),
    deploymentsPerAccount: z.coerce.number().int().min(0).max(1000),
    instancesPerAccount: z.coerce.number().int().min(0).max(1000),
  }),
  /** Bytes all of this process's dedicated instances may take together; unset: what the machine has available, less headroom. */
  deploymentMemoryBytes: z.coerce.number().int().min(0).optional(),
  /** The Files and Batch APIs' limits: the clamps live here, the checks in batches/ and the upload parser's in http/app.ts (BatchLimits). */
  batchLimits: z.object({
    maxFileBytes: z.coerce.number().int().min(1024),
    maxRequests: z.coerce.number().int().min(1),
    filesPerAccount: z.coerce.number().int().min(1),
    fileBytesPerAccount: z.coerce.number().int().min(1024),
    enqueuedTokensPerAccount: z.coerce.number().int().min(1),
    activeBatchesPerAccount: z.coerce.number().int().min(1),
    uploadsPerAccount: z.coerce.number().int().min(1),
    uploadsInFlight: z.coerce.number().int().min(1),
  }),
  /** Uploaded LoRA adapters' caps: the clamps live here, the checks in adapters/ (AdapterLimits). */
  adapterLimits: z.object({
    maxBytes: z.coerce
      .number()
      .int()
      .min(1024)
      .max(16 * 1024 ** 3),
    perAccount: z.coerce.number().int().min(0).max(1000),
    loadedBytes: z.coerce.number().int().min(0),
    uploadsPerAccount: z.literal(1),
    uploadsInFlight: z.literal(2),
  }),
  /** Tests shorten a batch's completion window to see it expire (seconds); unset: the window asked for. */
  batchWindowSeconds: z.coerce.number().int().min(1).optional(),
  /** Objects kept with `store: true` (chat completions, responses): how many per account and for how long. */
  storedObjects: z.object({
    perAccount: z.coerce.number().int().min(1),
    retentionDays: z.coerce.number().int().min(1).max(3650),
  }),
  /** Background responses (`background: true`) an account may have queued or running at once; 429 beyond. */
  backgroundResponsesPerAccount: z.coerce.number().int().min(0).max(10_000),
});

export type Settings = z.infer<typeof settingsSchema>;

export interface SettingsFlags {
  host?: string;
  port?: string | number;
  models?: string;
}

const list = (value: string | undefined) =>
  (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

export function loadSettings(flags: SettingsFlags, env: NodeJS.ProcessEnv = process.env): Settings {
  const parsed = settingsSchema.safeParse({
    host: flags.host ?? env.SWITCHYARD_HOST ?? "127.0.0.1",
    port: flags.port ?? env.SWITCHYARD_PORT ?? 8080,
    bodyLimit: env.SWITCHYARD_MAX_BODY_BYTES ?? 4 * 1024 * 1024,
    maxJsonDepth: env.SWITCHYARD_MAX_JSON_DEPTH ?? 128,
    requestTimeoutMs: env.SWITCHYARD_REQUEST_TIMEOUT_MS ?? 60_000,
    drainTimeoutMs: env.SWITCHYARD_DRAIN_TIMEOUT_MS ?? 30_000,
    maxUnauthenticatedPerIp: env.SWITCHYARD_MAX_UNAUTH_CONNECTIONS_PER_IP ?? 64,
    connections: {
      total: env.SWITCHYARD_MAX_CONNECTIONS || undefined,
      reserve: env.SWITCHYARD_CONNECTION_RESERVE || undefined,
      perKey: env.SWITCHYARD_MAX_CONNECTIONS_PER_KEY ?? 512,
      perAccount: env.SWITCHYARD_MAX_CONNECTIONS_PER_ACCOUNT ?? 1024,
      keepAliveTimeoutMs: env.SWITCHYARD_KEEP_ALIVE_TIMEOUT_MS ?? 72_000,
    },
    keyCacheMs: env.SWITCHYARD_KEY_CACHE_MS ?? (env.SWITCHYARD_DATABASE_URL ? KEY_CACHE_MS_SHARED : KEY_CACHE_MS_EMBEDDED),
    streamBufferBytes: env.SWITCHYARD_STREAM_BUFFER_BYTES ?? 64 * 1024,
    streamPauseTimeoutMs: env.SWITCHYARD_STREAM_PAUSE_TIMEOUT_MS ?? 60_000,
    accessLog: (env.SWITCHYARD_ACCESS_LOG ?? "debug").toLowerCase(),
    ...engineSettings(env),
    models: list(flags.models ?? env.SWITCHYARD_MODELS),
    databaseUrl: env.SWITCHYARD_DATABASE_URL || undefined,
    adminKey: env.SWITCHYARD_ADMIN_KEY || undefined,
    workerKey: env.SWITCHYARD_WORKER_KEY || undefined,
    adminMaxFailures: env.SWITCHYARD_ADMIN_MAX_FAILURES ?? 10,
    adminLockoutMs: Number(env.SWITCHYARD_ADMIN_LOCKOUT_S ?? 60) * 1000,
    corsOrigins: list(env.SWITCHYARD_CORS_ORIGINS ?? "*"),
    compression: (env.SWITCHYARD_COMPRESSION ?? "auto").toLowerCase(),
    deployments: {
      tickMs: env.SWITCHYARD_DEPLOYMENT_TICK_MS ?? 5000,
      segmentMs: Number(env.SWITCHYARD_DEPLOYMENT_SEGMENT_S ?? 3600) * 1000,
      idleMs: env.SWITCHYARD_DEPLOYMENT_IDLE_MS ?? 60_000,
    },
    deploymentLimits: {
      maxInstances: 4,
      maxBatchSize: env.SWITCHYARD_MAX_DEPLOYMENT_BATCH ?? 16,
      deploymentsPerAccount: env.SWITCHYARD_MAX_DEPLOYMENTS_PER_ACCOUNT ?? 4,
      instancesPerAccount: env.SWITCHYARD_MAX_INSTANCES_PER_ACCOUNT ?? 4,
    },
    deploymentMemoryBytes: env.SWITCHYARD_DEPLOYMENT_MEMORY_BYTES || undefined,
    ...filesAndStoredObjects(env),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`Invalid setting '${issue.path.join(".")}': ${issue.message}`);
  }
  return parsed.data;
}

/** The embedded engine's settings (apart, to keep loadSettings short). */
function engineSettings(env: NodeJS.ProcessEnv) {
  return {
    parallel: env.SWITCHYARD_PARALLEL ?? 8,
    maxWaiting: env.SWITCHYARD_MAX_WAITING ?? 256,
    threads: env.SWITCHYARD_THREADS ?? 0,
    shards: env.SWITCHYARD_SHARDS ?? 0,
    maxContext: env.SWITCHYARD_MAX_CONTEXT ?? 8192,
    flexMaxWaitMs: env.SWITCHYARD_FLEX_MAX_WAIT_MS ?? 10 * 60 * 1000,
    stallTimeoutMs: env.SWITCHYARD_STALL_TIMEOUT_MS ?? 120_000,
    streamPauseGraceMs: env.SWITCHYARD_STREAM_PAUSE_GRACE_MS ?? 3000,
    prefixCache: !["0", "false", "off"].includes((env.SWITCHYARD_PREFIX_CACHE ?? "1").toLowerCase()),
    speculation: (env.SWITCHYARD_SPECULATION ?? "auto").toLowerCase(),
    embeddingRuntime: (env.SWITCHYARD_EMBEDDING_RUNTIME ?? "onnx").toLowerCase(),
    adapterRoom: (env.SWITCHYARD_ADAPTER_ROOM ?? "auto").toLowerCase(),
    stepTokens: env.SWITCHYARD_STEP_TOKENS ?? 256,
    targets: {
      priority: { ttftMs: env.SWITCHYARD_PRIORITY_TTFT_MS ?? 1000, itlMs: env.SWITCHYARD_PRIORITY_ITL_MS ?? 50 },
      standard: { ttftMs: env.SWITCHYARD_STANDARD_TTFT_MS ?? 5000, itlMs: env.SWITCHYARD_STANDARD_ITL_MS ?? 300 },
    },
  };
}

/** The Files, Batch and adapter upload APIs' and stored objects' settings (apart, to keep loadSettings short). */
function filesAndStoredObjects(env: NodeJS.ProcessEnv) {
  return {
    batchLimits: {
      maxFileBytes: env.SWITCHYARD_FILE_MAX_BYTES || 200 * 1024 * 1024,
      maxRequests: env.SWITCHYARD_BATCH_MAX_REQUESTS || 50_000,
      filesPerAccount: env.SWITCHYARD_FILES_PER_ACCOUNT || 1000,
      fileBytesPerAccount: env.SWITCHYARD_FILE_BYTES_PER_ACCOUNT || 2 * 1024 * 1024 * 1024,
      enqueuedTokensPerAccount: env.SWITCHYARD_BATCH_ENQUEUED_TOKENS || 20_000_000,
      activeBatchesPerAccount: env.SWITCHYARD_BATCHES_PER_ACCOUNT || 100,
      uploadsPerAccount: env.SWITCHYARD_UPLOADS_PER_ACCOUNT || 2,
      uploadsInFlight: env.SWITCHYARD_UPLOADS_IN_FLIGHT || 4,
    },
    adapterLimits: {
      maxBytes: env.SWITCHYARD_ADAPTER_MAX_BYTES || 256 * 1024 * 1024,
      perAccount: env.SWITCHYARD_ADAPTERS_PER_ACCOUNT ?? 8,
      loadedBytes: env.SWITCHYARD_ADAPTER_LOADED_BYTES || 2 * 1024 ** 3,
      uploadsPerAccount: 1,
      uploadsInFlight: 2,
    },
    batchWindowSeconds: env.SWITCHYARD_BATCH_WINDOW_SECONDS || undefined,
    storedObjects: {
      perAccount: env.SWITCHYARD_STORED_PER_ACCOUNT || 10_000,
      retentionDays: env.SWITCHYARD_STORED_RETENTION_DAYS || 30,
    },
    backgroundResponsesPerAccount: env.SWITCHYARD_BACKGROUND_RESPONSES_PER_ACCOUNT ?? 16,
  };
}

/** What the connection guards enforce; config/settings.ts reads and clamps them (connectionCaps). */
export interface ConnectionCaps {
  /** Open connections the process accepts in all (below its open-file limit). */
  total: number;
  /** Of the total, what no key or account can hold; once open connections reach `total - reserve`, idle ones are closed first. */
  reserve: number;
  /** Open connections attributed to one key (at most `total - reserve`). */
  perKey: number;
  /** Open connections attributed to one account's keys together (at most `total - reserve`). */
  perAccount: number;
  /** How long a kept-alive connection may sit idle between requests before it is closed (Node's keepAliveTimeout). */
  keepAliveTimeoutMs: number;
}

/**
 * The connection caps for a process that may open `fileLimit` descriptors. A tenth of them (at
 * least 256) stays for what is not a connection: model files, the database, worker pipes, logs. The
 * reserve defaults to a twentieth of the total (at least 16, at most half), and no key or account
 * may hold more than the total less the reserve, so `/health` and new tenants always find room.
 */
export function connectionCaps(settings: Settings, fileLimit: number): ConnectionCaps {
  const { total: wanted, reserve: wantedReserve, perKey, perAccount, keepAliveTimeoutMs } = settings.connections;
  const ceiling = Math.max(16, fileLimit - Math.max(256, Math.floor(fileLimit / 10)));
  const total = Math.min(wanted ?? ceiling, ceiling);
  const reserve = Math.min(wantedReserve ?? Math.max(16, Math.floor(total / 20)), Math.floor(total / 2));
  const held = total - reserve;
  return { total, reserve, perKey: Math.min(perKey, held), perAccount: Math.min(perAccount, held), keepAliveTimeoutMs };
}
