import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { loadCatalog } from "../../src/catalog/load.js";
import { findPulledModel } from "../../src/catalog/pull.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { minimumPromptTokens, minimumTextTokens } from "../../src/engine/chat-template.js";
import { openLlamaLibrary } from "../../src/engine/native/llama-lib.js";
import { loadModel, type LoadedModel } from "../../src/engine/native/loaded-model.js";
import { SpecialTextSplitter } from "../../src/engine/special-split.js";
import { GEMMA, SMOLLM2 } from "../helpers/server.js";

const QWEN = "Qwen/Qwen2.5-Coder-0.5B-Instruct";

/** llama.cpp's own tokenization of the whole text in one call: the reference. */
function wholeText(model: LoadedModel, text: string, addSpecial: boolean): number[] {
  const lib = openLlamaLibrary();
  const vocab = lib.llama_model_get_vocab(model.handle);
  const bytes = Buffer.from(text, "utf8");
  const out = new Int32Array(bytes.length + 8);
  const count = lib.llama_tokenize(vocab, bytes, bytes.length, out, out.length, addSpecial, true);
  assert.ok(count >= 0);
  return Array.from(out.subarray(0, count));
}

/** Texts dense with special tokens, newlines and runs of spaces (special in Gemma's vocabulary). */
function specialHeavyTexts(count: number): string[] {
  const parts = [
    "<|im_start|>",
    "<|im_end|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "<|endoftext|>",
    "\n",
    "\n\n",
    " ",
    "  ",
    "\t",
    "a",
    "hello",
    " world",
    "é",
    "日本",
    "🌍",
    "<",
    "|",
    ">",
  ];
  let seed = 7;
  const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  return Array.from({ length: count }, () => Array.from({ length: 200 + random(3000) }, () => parts[random(parts.length)]).join(""));
}

describe("prompts are tokenized in pieces, exactly as whole (issue 11)", () => {
  const models = new Map<string, LoadedModel>();
  before(async () => {
    const modelsDir = resolveModelsDir();
    for (const entry of (await loadCatalog()).filter((e) => [SMOLLM2, GEMMA, QWEN].includes(e.id))) {
      const pulled = await findPulledModel(entry, modelsDir);
      assert.ok(pulled, `${entry.id} is pulled (npm test pulls it first)`);
      models.set(entry.id, loadModel(pulled.path));
    }
  });
  after(() => {
    for (const model of models.values()) model.free();
  });

  test("the same tokens as one llama.cpp call, with and without BOS/EOS, on texts dense with special tokens", () => {
    const texts = specialHeavyTexts(40);
    for (const [id, model] of models) {
      for (const [i, text] of texts.entries()) {
        for (const addSpecial of [false, true])
          assert.deepEqual(
            model.tokenize(text, { addSpecial }),
            wholeText(model, text, addSpecial),
            `${id}, text ${i}, addSpecial ${addSpecial}`,
          );
      }
    }
  });

  test("a long conversation is cut into pieces of a bounded number of special tokens", () => {
    const model = models.get(SMOLLM2)!;
    const rendered = "<|im_start|>user\na<|im_end|>\n".repeat(5000);
    const specials = ["<|im_start|>", "<|im_end|>"].map((t) => ({ bytes: Buffer.from(t), stripsSpaces: false }));
    const cuts = new SpecialTextSplitter(specials).cuts(Buffer.from(rendered), 64);
    assert.ok(cuts.length >= 10_000 / 64 - 2, `${cuts.length} cuts`);
    assert.deepEqual(model.tokenize(rendered), wholeText(model, rendered, false));
  });

  test("no cut where a special text spans it or one starts inside the token found there", () => {
    const splitter = new SpecialTextSplitter(["ab", "ba", "x"].map((t) => ({ bytes: Buffer.from(t), stripsSpaces: false })));
    // "aba": "ab" at 0 and "ba" at 1 overlap; the only clean cuts are before each "x".
    const text = Buffer.from(`${"x".repeat(3)}aba${"x".repeat(3)}`);
    const cuts = splitter.cuts(text, 1);
    assert.ok(!cuts.includes(4) && !cuts.includes(5), `${cuts}`);
    assert.ok(cuts.includes(6), `${cuts}`);
    // Tokens that strip spaces: never cut beside a space.
    const stripping = new SpecialTextSplitter([{ bytes: Buffer.from("<s>"), stripsSpaces: true }]);
    assert.deepEqual(stripping.cuts(Buffer.from("<s> <s><s>"), 1), [7]);
  });

  test("the cheap lower bound never exceeds the real count", () => {
    for (const [id, model] of models) {
      const longWords = "ManagementPlaneProtection translatesAutoresizingMaskIntoConstraints addEventListener ";
      for (const content of [
        "hello world ".repeat(500),
        `\n${" ".repeat(80)}`,
        "#".repeat(5000),
        "日本語のテキスト".repeat(300),
        `<think>${"x".repeat(9000)}</think>  answer  `,
        longWords.repeat(200),
        "a1".repeat(5000),
      ]) {
        const messages = [
          { role: "user" as const, content },
          { role: "assistant" as const, content },
        ];
        const rendered = wholeText(model, messages.map((m) => m.content).join(""), false).length;
        assert.ok(minimumPromptTokens(messages, model) <= Math.max(2, rendered), `${id}: ${content.slice(0, 20)}`);
        assert.ok(minimumTextTokens(content, model) <= wholeText(model, content, false).length, `${id}: ${content.slice(0, 20)}`);
      }
    }
  });

  test("letters and digits bound plain text far tighter than bytes: 600 KB of words cannot fit SmolLM2's 8,192", () => {
    const model = models.get(SMOLLM2)!;
    const text = "hello world ".repeat(50_000);
    assert.ok(Math.ceil(Buffer.byteLength(text) / model.maxTokenBytes) < 8192, "the byte bound alone lets it through");
    assert.ok(minimumTextTokens(text, model) > 8192, `${minimumTextTokens(text, model)}`);
  });
});
