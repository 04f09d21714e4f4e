/** Parsing of a catalog entry's `source` string into where its GGUF comes from. */

export type ModelSource =
  | { kind: "pypi"; packageName: string; version: string }
  | { kind: "file"; path: string };

/** PEP 508 distribution name followed by an exact `==` version pin. */
const PYPI_SOURCE = /^pypi:([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.!+_-]*)$/;
const FILE_SOURCE = /^file:(.+)$/;

/** Returns null when the string is neither `pypi:<package>==<version>` nor `file:<path>`. */
export function parseSource(source: string): ModelSource | null {
  const pypi = PYPI_SOURCE.exec(source);
  if (pypi) return { kind: "pypi", packageName: pypi[1]!, version: pypi[2]! };
  const file = FILE_SOURCE.exec(source);
  if (file) return { kind: "file", path: file[1]! };
  return null;
}

/** Like parseSource, for callers holding an already validated entry. */
export function requireSource(modelId: string, source: string): ModelSource {
  const parsed = parseSource(source);
  if (!parsed) throw new Error(`Model '${modelId}' has an unsupported source '${source}' (expected 'pypi:<package>==<version>' or 'file:<path>').`);
  return parsed;
}
