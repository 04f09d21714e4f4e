import { createHash } from "node:crypto";

/**
 * OpenAI's `system_fingerprint`: one value per model file and engine configuration, so a client can
 * tell that two answers came from the same weights and settings (which `seed` reproducibility needs).
 * Keys are sorted so the same settings always give the same value.
 */
export function systemFingerprint(modelSha256: string, engineConfig: Record<string, unknown>): string {
  const config = Object.fromEntries(
    Object.entries(engineConfig)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1)),
  );
  const digest = createHash("sha256").update(modelSha256).update("\0").update(JSON.stringify(config)).digest("hex");
  return `fp_${digest.slice(0, 12)}`;
}
