import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import Big from "big.js";
import OpenAI from "openai";
import { findPulledModel } from "../../src/catalog/pull.js";
import { loadCatalog } from "../../src/catalog/load.js";
import { writePeftLoraGguf } from "../../src/catalog/convert/peft-lora.js";
import { readGgufLayout } from "../../src/catalog/gguf/layout.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { createTestDatabase, type TestDatabase } from "../helpers/databases.js";
import { api } from "../helpers/deployments.js";
import {
  adminKey,
  createKey,
  postChat,
  readSseTimed,
  ROOT,
  SMOLLM2,
  SMOLLM2_NO_END,
  startServer,
  type RunningServer,
  emptyDataDir,
} from "../helpers/server.js";

// Issue 35's uploads: an account's LoRA adapter sent to POST /v1/adapters, served as its own
// private model on SmolLM2's engine, billed under its own id at the base's prices, deleted, and
// back after a restart. The adapter is the test adapter (scripts/make-test-adapter.py, B drawn
// with std 0.1: enough to change SmolLM2's greedy output).

const MAKER_PYTHON = join(ROOT, ".cache/py-embed/bin/python");
/** The test adapter's files are ~9.8 MB together: a limit of 12 MiB takes it and refuses 13 MB. */
const MAX_BYTES = 12 * 1024 * 1024;
const ENV = {
  SWITCHYARD_PARALLEL: "2",
  SWITCHYARD_MAX_CONTEXT: "1024",
  SWITCHYARD_ADAPTERS_PER_ACCOUNT: "2",
  SWITCHYARD_ADAPTER_MAX_BYTES: String(MAX_BYTES),
};
const QUESTION = [{ role: "user" as const, content: "Count from one to twenty." }];

interface Files {
  config?: string;
  model?: string;
  gguf?: string;
}

/** POST /v1/adapters with the given fields and files. */
async function upload(server: RunningServer, key: string, fields: Record<string, string>, files: Files) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  if (files.config) form.append("adapter_config", new Blob([readFileSync(files.config)]), "adapter_config.json");
  if (files.model) form.append("adapter_model", new Blob([readFileSync(files.model)]), "adapter_model.safetensors");
  if (files.gguf) form.append("adapter_gguf", new Blob([readFileSync(files.gguf)]), "adapter.gguf");
  const response = await fetch(`${server.url}/v1/adapters`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
  return { status: response.status, body: await response.json() };
}

/** 16 greedy tokens through the official client. */
async function greedy(server: RunningServer, key: string, model: string): Promise<string> {
  const client = new OpenAI({ apiKey: key, baseURL: server.baseURL, timeout: 300_000, maxRetries: 0 });
  const reply = await client.chat.completions.create({ model, messages: QUESTION, max_tokens: 16, temperature: 0 });
  return reply.choices[0]!.message.content ?? "";
}

describe("LoRA adapters uploaded by an account (POST /v1/adapters)", () => {
  const dataDir = emptyDataDir("switchyard-adapter-uploads-");
  const dir = mkdtempSync(join(tmpdir(), "switchyard-upload-files-"));
  let server: RunningServer;
  let owner = "";
  let plain = "";
  let rival = "";
  let support: { id: string; model_id: string } = { id: "", model_id: "" };
  let adapterText = "";

  const peft = { config: join(dir, "peft/adapter_config.json"), model: join(dir, "peft/adapter_model.safetensors") };
  const modelIds = async (key: string) => {
    const client = new OpenAI({ apiKey: key, baseURL: server.baseURL, timeout: 60_000 });
    return (await client.models.list()).data as unknown as Array<{ id: string; metadata: Record<string, any> }>;
  };
  const storedFiles = () => readdirSync(join(dataDir, "adapters")).filter((name) => name.endsWith(".gguf"));

  before(async () => {
    execFileSync(MAKER_PYTHON, [join(ROOT, "scripts/make-test-adapter.py"), join(dir, "peft"), "--b-std", "0.1"]);
    // The same adapter, its config saying it was trained on another model.
    const config = JSON.parse(readFileSync(peft.config, "utf8")) as Record<string, unknown>;
    writeFileSync(join(dir, "qwen_config.json"), JSON.stringify({ ...config, base_model_name_or_path: "Qwen/Qwen2.5-0.5B" }));
    writeFileSync(join(dir, "big.gguf"), Buffer.alloc(13_000_000));
    owner = createKey(dataDir, "tester", ["--manage-deployments"]);
    server = await startServer({ dataDir, key: owner, env: ENV });
    plain = await adminKey(server, "tester");
    rival = await adminKey(server, "rival", { manage_deployments: true });
  });
  after(async () => {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  test("a key without the manage-deployments right cannot upload: 403, and nothing is kept", async () => {
    const refused = await upload(server, plain, { base_model: SMOLLM2, name: "support" }, peft);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, "missing_manage_deployments_right");
    assert.equal(refused.body.error.type, "permission_error");
    assert.deepEqual((await api(server, plain, "GET", "/v1/adapters")).body.data, []);
  });

  test("an upload is its account's model: listed with its base, tiers and prices, and invisible to another account", async () => {
    const created = await upload(server, owner, { base_model: SMOLLM2, name: "support" }, peft);
    assert.equal(created.status, 200, JSON.stringify(created.body));
    support = created.body;
    assert.match(created.body.id, /^adp_/);
    assert.equal(created.body.object, "adapter");
    assert.equal(created.body.model_id, "tester/support");
    assert.equal(created.body.base_model, SMOLLM2);
    assert.equal(created.body.format, "peft");
    assert.equal(created.body.status, "ready");
    assert.match(created.body.sha256, /^[0-9a-f]{64}$/);
    const mine = await modelIds(plain);
    const listed = mine.find((m) => m.id === "tester/support")!;
    const base = mine.find((m) => m.id === SMOLLM2)!;
    assert.equal(listed.metadata.adapter_of, SMOLLM2);
    assert.equal(listed.metadata.status, "ready");
    assert.deepEqual(listed.metadata.adapter, { id: support.id });
    assert.deepEqual(listed.metadata.pricing, base.metadata.pricing, "the base's prices and tiers");
    assert.ok(!(await modelIds(rival)).some((m) => m.id === "tester/support"), "another account never sees it");
    const health = (await (await fetch(`${server.url}/health`)).json()) as { models: Array<{ id: string }> };
    assert.ok(!health.models.some((m) => m.id === "tester/support"), "nor does /health");
  });

  test("chat with it runs the adapter: its greedy output is not the base's", async () => {
    const [baseText, withAdapter] = [await greedy(server, owner, SMOLLM2), await greedy(server, owner, support.model_id)];
    adapterText = withAdapter;
    assert.notEqual(withAdapter, baseText);
    assert.ok(withAdapter.length > 0);
  });

  test("another account gets the 404 of a model that does not exist, and cannot read or delete it", async () => {
    const chat = await postChat(server, { model: support.model_id, messages: QUESTION, max_tokens: 4 }, { key: rival });
    assert.equal(chat.status, 404);
    assert.equal(((await chat.json()) as { error: { code: string } }).error.code, "model_not_found");
    for (const method of ["GET", "DELETE"]) {
      const reply = await api(server, rival, method, `/v1/adapters/${support.id}`);
      assert.equal(reply.status, 404, method);
      assert.equal(reply.body.error.code, "not_found");
    }
    assert.deepEqual((await api(server, rival, "GET", "/v1/adapters")).body.data, []);
  });

  test("an adapter of another model is refused with the checker's reason, and nothing is kept", async () => {
    const files = storedFiles();
    const refused = await upload(server, owner, { base_model: SMOLLM2, name: "wrong" }, { ...peft, config: join(dir, "qwen_config.json") });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, "invalid_adapter");
    assert.match(
      refused.body.error.message,
      /trained on 'Qwen\/Qwen2\.5-0\.5B' \(base_model_name_or_path\), not on 'HuggingFaceTB\/SmolLM2-135M-Instruct'/,
    );
    assert.deepEqual(storedFiles(), files);
    assert.equal((await api(server, owner, "GET", "/v1/adapters")).body.data.length, 1);
  });

  test("the caps: files over the upload limit are a 413, and an account keeps at most its number of adapters", async () => {
    const big = await upload(server, owner, { base_model: SMOLLM2, name: "big" }, { gguf: join(dir, "big.gguf") });
    assert.equal(big.status, 413);
    assert.equal(big.body.error.code, "adapter_too_large");
    const taken = await upload(server, owner, { base_model: SMOLLM2, name: "support" }, peft);
    assert.equal(taken.status, 409);
    assert.equal(taken.body.error.code, "name_taken");
    assert.equal(
      (await upload(server, owner, { base_model: "smollm2-135m", name: "second" }, peft)).status,
      200,
      "a base named by its alias",
    );
    const third = await upload(server, owner, { base_model: SMOLLM2, name: "third" }, peft);
    assert.equal(third.status, 400);
    assert.equal(third.body.error.code, "too_many_adapters");
    assert.equal(storedFiles().length, 2);
  });

  test("the ledger records its requests under its own id, at its base's prices", async () => {
    const usage = await api(server, owner, "GET", "/v1/usage?group_by=model");
    const row = usage.body.data.find((r: { group: string }) => r.group === "tester/support");
    assert.ok(row, JSON.stringify(usage.body.data));
    const prices = (await modelIds(owner)).find((m) => m.id === "tester/support")!.metadata.pricing.tiers.default;
    const price = (key: string) => new Big(String(prices[key]));
    const expected = price("input")
      .times(row.prompt_tokens - row.cached_tokens)
      .plus(price("cached_input").times(row.cached_tokens))
      .plus(price("output").times(row.completion_tokens))
      .div(1_000_000);
    assert.ok(row.completion_tokens > 0);
    assert.ok(new Big(String(row.cost_usd)).eq(expected), `${row.cost_usd} against ${expected.toString()}`);
  });

  test("deleted while a stream runs on it: the stream finishes and is billed; new requests get 404", async () => {
    const body = { model: support.model_id, messages: QUESTION, max_tokens: 48, temperature: 0, stream: true, logit_bias: SMOLLM2_NO_END };
    const stream = await postChat(server, body, { key: owner });
    assert.equal(stream.status, 200);
    let running!: () => void;
    const generating = new Promise<void>((resolve) => (running = resolve));
    const events = readSseTimed(stream, () => running());
    await generating;
    const removed = await api(server, owner, "DELETE", `/v1/adapters/${support.id}`);
    assert.deepEqual(removed.body, { id: support.id, object: "adapter", deleted: true });
    const later = await postChat(server, { model: support.model_id, messages: QUESTION, max_tokens: 4 }, { key: owner });
    assert.equal(later.status, 404);
    assert.equal(((await later.json()) as { error: { code: string } }).error.code, "model_not_found");
    const chunks = (await events)
      .map((event) => event.data)
      .filter((data) => data !== "[DONE]")
      .map((data) => JSON.parse(data));
    assert.equal(chunks.at(-1).choices[0].finish_reason, "length", "the running stream ran to its max_tokens");
    assert.equal((await api(server, owner, "GET", `/v1/adapters/${support.id}`)).status, 404);
    assert.ok(!(await modelIds(owner)).some((m) => m.id === support.model_id));
    const usage = await api(server, owner, "GET", "/v1/usage?group_by=model");
    const row = usage.body.data.find((r: { group: string }) => r.group === "tester/support");
    assert.equal(row.by_status.completed, 2, "the chat before and the stream, each billed once");
  });

  test("uploads survive a restart: listed and served again, the deleted one still gone", async () => {
    const before = await greedy(server, owner, "tester/second");
    assert.equal(before, adapterText, "the same adapter gives the same greedy output");
    await server.stop();
    server = await startServer({ dataDir, key: owner, env: ENV });
    const listed = (await api(server, owner, "GET", "/v1/adapters")).body.data as Array<{ name: string; status: string }>;
    assert.deepEqual(
      listed.map((a) => [a.name, a.status]),
      [["second", "ready"]],
    );
    assert.equal(await greedy(server, owner, "tester/second"), adapterText);
    assert.equal((await postChat(server, { model: support.model_id, messages: QUESTION, max_tokens: 4 }, { key: owner })).status, 404);
    assert.equal(storedFiles().length, 1, "the deleted adapter's file went once its last request ended");
  });
});

describe("uploaded adapters on PostgreSQL: a GGUF LoRA and its PEFT folder serve alike, and both come back after a restart", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-adapter-uploads-pg-"));
  const dir = mkdtempSync(join(tmpdir(), "switchyard-upload-files-pg-"));
  let database: TestDatabase | undefined;
  let env: NodeJS.ProcessEnv = {};
  let server: RunningServer;
  let key = "";

  before(async () => {
    execFileSync(MAKER_PYTHON, [join(ROOT, "scripts/make-test-adapter.py"), join(dir, "peft"), "--b-std", "0.1"]);
    // The same adapter as a GGUF LoRA, written by the converter a catalog adapter goes through.
    const base = (await loadCatalog()).find((entry) => entry.id === SMOLLM2)!;
    const layout = await readGgufLayout((await findPulledModel(base, resolveModelsDir()))!.path);
    await writePeftLoraGguf(join(dir, "peft"), { id: SMOLLM2, layout }, join(dir, "adapter.gguf"), "gguf");
    database = await createTestDatabase("postgres");
    env = { ...ENV, SWITCHYARD_DATABASE_URL: database.url };
    key = createKey(dataDir, "keeper", ["--manage-deployments"], env);
    server = await startServer({ dataDir, key, env });
  });
  after(async () => {
    await server?.stop();
    await database?.dispose();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  test("upload, chat, restart, chat", async () => {
    const files = { config: join(dir, "peft/adapter_config.json"), model: join(dir, "peft/adapter_model.safetensors") };
    assert.equal((await upload(server, key, { base_model: SMOLLM2, name: "peft" }, files)).status, 200);
    const gguf = await upload(server, key, { base_model: SMOLLM2, name: "gguf" }, { gguf: join(dir, "adapter.gguf") });
    assert.equal(gguf.status, 200, JSON.stringify(gguf.body));
    assert.equal(gguf.body.format, "gguf");
    const text = await greedy(server, key, "keeper/peft");
    assert.equal(await greedy(server, key, "keeper/gguf"), text, "the same weights, the same greedy tokens");
    assert.notEqual(await greedy(server, key, SMOLLM2), text);
    await server.stop();
    server = await startServer({ dataDir, key, env });
    const listed = (await api(server, key, "GET", "/v1/adapters")).body.data as Array<{ name: string; status: string }>;
    assert.deepEqual(listed.map((a) => `${a.name} ${a.status}`).sort(), ["gguf ready", "peft ready"]);
    assert.equal(await greedy(server, key, "keeper/gguf"), text);
  });
});

if (!existsSync(MAKER_PYTHON)) throw new Error("no .cache/py-embed: scripts/test-setup.sh makes it");
