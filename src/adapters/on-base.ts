/**
 * Serving an adapter on its base model's engine, for catalog adapters (cli/serve-adapters.ts) and
 * uploads alike: the base checked, the adapter's GGUF loaded into its engine, and the backend and
 * fingerprint the adapter is published with.
 */
import { adapterBackend } from "../backends/adapter-backend.js";
import type { Backend } from "../backends/backend.js";
import type { CatalogEntry, ModelFile } from "../catalog/types.js";
import { systemFingerprint } from "../serving/fingerprint.js";
import { privateOwner, type ModelRegistry, type ServedModel } from "../serving/model-registry.js";
import type { Adapter } from "./types.js";

/** A served model whose engine takes adapters. */
export type AdapterBaseModel = ServedModel & { backend: Backend & Required<Pick<Backend, "addAdapter" | "removeAdapter">> };

/** Why a public model cannot carry an adapter here; undefined when it can (once ready). */
export function whyNotAdaptable(base: ServedModel): string | undefined {
  if (privateOwner(base) !== undefined) return "it is not a catalog model";
  if (base.entry.adapter_of !== undefined) return "it is itself an adapter";
  if (base.entry.tags.includes("Embedding")) return "it is an embedding model";
  if (base.entry.backend) return "it runs on an upstream engine, which takes no adapters from this server";
  if (base.state === "ready" && (!base.backend?.addAdapter || !base.backend.removeAdapter)) return "its engine takes no adapters";
  return undefined;
}

/** The base an adapter runs on, ready; an Error saying why not. */
export function adapterBaseOf(registry: ModelRegistry, baseId: string): AdapterBaseModel {
  const base = registry.get(baseId);
  if (base?.state !== "ready" || !base.backend) throw new Error(`its base model '${baseId}' is not served by this server`);
  const why = whyNotAdaptable(base);
  if (why) throw new Error(`its base model '${baseId}' cannot carry adapters: ${why}`);
  return base as AdapterBaseModel;
}

/** Loads the adapter's GGUF into the base's engine under `key`: what it is then served with. */
export async function loadOnBase(
  base: AdapterBaseModel,
  key: string,
  file: Pick<ModelFile, "path" | "sha256">,
): Promise<{ backend: Backend; systemFingerprint: string }> {
  await base.backend.addAdapter(key, file.path);
  return {
    backend: adapterBackend(base.backend, key),
    systemFingerprint: systemFingerprint(file.sha256, { base: base.systemFingerprint }),
  };
}

/**
 * The entry an uploaded adapter is served under: its own id, the base's abilities, and the base's
 * token prices and tiers (an adapter has no instance hours).
 */
export function uploadEntry(base: CatalogEntry, adapter: Pick<Adapter, "modelId" | "createdAt">): CatalogEntry {
  const { pull: _pull, dedicated: _dedicated, aliases: _aliases, source: _source, expect: _expect, ...rest } = base;
  const { dedicated_instance_hour: _hourly, ...pricing } = base.pricing;
  return { ...rest, id: adapter.modelId, adapter_of: base.id, created: Math.floor(adapter.createdAt.getTime() / 1000), pricing };
}
