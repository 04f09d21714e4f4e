import { homedir } from "node:os";
import { join, resolve } from "node:path";

/** Where one server's state lives (database, local admin token). Overridable per command. */
export function resolveDataDir(flag?: string): string {
  return resolve(flag ?? process.env.SWITCHYARD_DATA_DIR ?? join(homedir(), ".local", "share", "switchyard"));
}

/** One models directory shared by every data dir, so a model is pulled once per machine. */
export function resolveModelsDir(): string {
  if (process.env.SWITCHYARD_MODELS_DIR) return resolve(process.env.SWITCHYARD_MODELS_DIR);
  const cacheHome = process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache");
  return join(cacheHome, "switchyard", "models");
}
