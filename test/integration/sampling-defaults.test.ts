import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { loadCatalog } from "../../src/catalog/load.js";
import { findPulledModel } from "../../src/catalog/pull.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

/** Two entries serving the pulled SmolLM2 file in place, each with its own catalog sampling defaults. */
const COLD = "acme/smol-cold";
const TOP1 = "acme/smol-top1";
const PROMPT = [{ role: "user" as const, content: "Write one sentence about the sea." }];
const SEEDS = [1, 2, 3, 4];

async function catalogWithDefaults(dir: string): Promise<string> {
  const smol = (await loadCatalog()).find((e) => e.id === SMOLLM2)!;
  const pulled = await findPulledModel(smol, resolveModelsDir());
  assert.ok(pulled, "SmolLM2 is pulled (the test setup pulls it)");
  const copy = { ...smol, aliases: undefined, dedicated: undefined, source: `file:${pulled.path}` };
  const models = [
    { ...copy, id: COLD, sampling_defaults: { temperature: 0 } },
    { ...copy, id: TOP1, sampling_defaults: { top_k: 1 } },
  ];
  writeFileSync(join(dir, "catalog.json"), JSON.stringify({ models }));
  return join(dir, "catalog.json");
}

describe("a catalog model's sampling defaults fill what a request leaves unset", () => {
  let server: RunningServer;
  let client: OpenAI;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "switchyard-sampling-"));
    server = await startServer({ models: [COLD, TOP1], env: { SWITCHYARD_CATALOG: await catalogWithDefaults(dir) } });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const answer = async (model: string, extra: Record<string, unknown>) =>
    (await client.chat.completions.create({ model, messages: PROMPT, max_tokens: 24, ...extra } as never)).choices[0]!.message.content!;
  const answers = (model: string, extra: Record<string, unknown> = {}) =>
    Promise.all(SEEDS.map((seed) => answer(model, { seed, ...extra })));

  test("temperature: unset, it is the catalog's 0 (greedy, whatever the seed); a request's own temperature wins", async () => {
    const greedy = await answer(COLD, { temperature: 0 });
    assert.deepEqual(
      await answers(COLD),
      SEEDS.map(() => greedy),
    );
    const sampled = await answers(COLD, { temperature: 1.5 });
    assert.ok(new Set(sampled).size > 1, `seeded samples at temperature 1.5 differ: ${JSON.stringify(sampled)}`);
  });

  test("top_k: unset, it is the catalog's 1 (greedy at temperature 1); a request's top_k of 0 or -1 means no truncation", async () => {
    const greedy = await answer(TOP1, { temperature: 0 });
    assert.deepEqual(
      await answers(TOP1, { temperature: 1 }),
      SEEDS.map(() => greedy),
    );
    for (const none of [0, -1]) {
      const sampled = await answers(TOP1, { temperature: 1.5, top_k: none });
      assert.ok(new Set(sampled).size > 1, `top_k ${none}: seeded samples differ: ${JSON.stringify(sampled)}`);
    }
  });
});
