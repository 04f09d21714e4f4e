/**
 * The process's environment is read here and nowhere else in src/ (`npm run shape` counts reads
 * outside config/). The server's settings are parsed from it in settings.ts; what is read before or
 * beside them (the database URL, the catalog, the CLI's API key, tracing, the rate-limit defaults)
 * goes through these two. Every SWITCHYARD_* variable is documented in settings-reference.ts.
 */

/** The whole environment, for code that reads several variables and takes `env` as a parameter (tests hand in their own). */
export function processEnvironment(): NodeJS.ProcessEnv {
  return process.env;
}

/** One variable as set: undefined when unset, and empty stays empty (the caller says what empty means). */
export function environmentVariable(name: string): string | undefined {
  return process.env[name];
}
