/**
 * Lookups in PyPI's JSON API. The per-version endpoint (`/pypi/<pkg>/<version>/json`) is unavailable on some
 * networks, so this reads the project document (`/pypi/<pkg>/json`) and picks `releases[version]` from it.
 */
import { z } from "zod";
import { fetchJson } from "../download.js";
import { pypiUrl } from "../../config/environment.js";

export const DEFAULT_PYPI_URL = "https://pypi.org";

export interface WheelFile {
  filename: string;
  url: string;
  size: number;
  sha256: string;
}

export interface PypiRelease {
  packageName: string;
  version: string;
  wheel: WheelFile;
  /** `info.requires_dist`, only when `info` describes this very version (it describes the latest one). */
  requiresDist: string[] | null;
}

const projectSchema = z.object({
  info: z.object({ version: z.string(), requires_dist: z.array(z.string()).nullish() }),
  releases: z.record(z.string(), z.array(z.unknown())),
});

const releaseFileSchema = z.object({
  filename: z.string(),
  url: z.string(),
  size: z.number().int().nonnegative(),
  packagetype: z.string(),
  digests: z.object({ sha256: z.string().regex(/^[0-9a-fA-F]{64}$/) }),
});

/** PEP 503 normalisation, the form PyPI's URLs use. */
export function normalizePackageName(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

export function pypiBaseUrl(override?: string): string {
  return (override ?? pypiUrl() ?? DEFAULT_PYPI_URL).replace(/\/+$/, "");
}

export async function fetchRelease(baseUrl: string, packageName: string, version: string): Promise<PypiRelease> {
  const url = `${baseUrl}/pypi/${normalizePackageName(packageName)}/json`;
  const document = await fetchJson(url);
  if (document === null) throw new Error(`package '${packageName}' was not found on ${baseUrl} (HTTP 404 for ${url})`);
  const project = projectSchema.safeParse(document);
  if (!project.success) throw new Error(`${url} is not a PyPI project document: ${project.error.issues[0]?.message ?? "unexpected shape"}`);
  const files = project.data.releases[version];
  if (!files) {
    const known = Object.keys(project.data.releases).slice(-10).join(", ") || "none";
    throw new Error(`package '${packageName}' has no release ${version} on ${baseUrl} (latest releases: ${known})`);
  }
  const wheels = files.flatMap((file) => {
    const parsed = releaseFileSchema.safeParse(file);
    return parsed.success && parsed.data.packagetype === "bdist_wheel" ? [parsed.data] : [];
  });
  // GGUF wheels are pure data, so the platform-independent one is the right pick when there are several.
  const wheel = wheels.find((file) => file.filename.endsWith("-none-any.whl")) ?? wheels[0];
  if (!wheel) throw new Error(`release ${packageName}==${version} on ${baseUrl} has no wheel (bdist_wheel) file with a sha256 digest`);
  return {
    packageName,
    version,
    wheel: {
      filename: wheel.filename,
      url: new URL(wheel.url, `${baseUrl}/`).href,
      size: wheel.size,
      sha256: wheel.digests.sha256.toLowerCase(),
    },
    requiresDist: project.data.info.version === version ? (project.data.info.requires_dist ?? []) : null,
  };
}

export interface PinnedRequirement {
  name: string;
  version: string;
}

/** `name==version` (optionally `name (==version)`), with no extras and no environment marker; anything else is null. */
export function parsePinnedRequirement(requirement: string): PinnedRequirement | null {
  const match = /^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*\(?\s*==\s*([A-Za-z0-9][A-Za-z0-9.!+_-]*)\s*\)?$/.exec(requirement.trim());
  return match ? { name: match[1]!, version: match[2]! } : null;
}
