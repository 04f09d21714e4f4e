import { join } from "node:path";
import { createAdapterManager } from "../adapters/manager.js";
import type { Settings } from "../config/settings.js";
import type { RequestLimits } from "../limits/ports.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { Database } from "../storage/database.js";
import { uploadAdmission } from "./batch-runtime.js";

/** What an adapter upload is admitted as against the key's limits (its request-rate window; no tokens). */
const ADAPTER_UPLOADS = "adapters:upload";

/**
 * Accounts' LoRA adapter uploads (`/v1/adapters`), wired for `switchyard serve`: files under
 * `<data dir>/adapters`, rows in the database, loaded into the base models' engines once those have
 * loaded (`start`).
 */
export function startAdapterUploads(
  settings: Settings,
  wiring: { db: Database; registry: ModelRegistry; requestLimits: RequestLimits; dataDir: string; log: (message: string) => void },
) {
  const { db, registry, requestLimits, dataDir, log } = wiring;
  return createAdapterManager({
    db,
    registry,
    dir: join(dataDir, "adapters"),
    limits: settings.adapterLimits,
    admit: uploadAdmission(db, requestLimits, ADAPTER_UPLOADS),
    log,
  });
}
