import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { loadCatalog } from "../../src/catalog/load.js";
import { findPulledModel } from "../../src/catalog/pull.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { detokenizer } from "../../src/engine/core/output.js";
import { loadModel, type LoadedModel } from "../../src/engine/native/loaded-model.js";
import { TextStream } from "../../src/engine/text-stream.js";
import { ReasoningSplitter, type ReasoningSplitOptions } from "../../src/serving/reasoning-split.js";
import { GEMMA, SMOLLM2 } from "../helpers/server.js";

interface Split {
  reasoning: string;
  content: string;
  reasoningTokens: number;
  contentTokens: number;
  /** Reasoning tokens as the splitter's running total reports them. */
  total: number;
}

/** Feeds the chunks (one token each) through a splitter, then finishes it. */
function split(chunks: readonly string[], options: ReasoningSplitOptions = {}, extraTokens = 0): Split {
  const splitter = new ReasoningSplitter(options);
  const out: Split = { reasoning: "", content: "", reasoningTokens: 0, contentTokens: 0, total: 0 };
  const add = (d: { reasoning: string; content: string; reasoningTokens: number; contentTokens: number }) => {
    out.reasoning += d.reasoning;
    out.content += d.content;
    out.reasoningTokens += d.reasoningTokens;
    out.contentTokens += d.contentTokens;
  };
  for (const chunk of chunks) add(splitter.push(chunk, 1));
  add(splitter.finish(extraTokens));
  out.total = splitter.reasoningTokens;
  return out;
}

/** A small deterministic PRNG (mulberry32), so random chunkings are the same on every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomChunks(text: string, random: () => number): string[] {
  const chunks: string[] = [];
  for (let at = 0; at < text.length;) {
    const size = 1 + Math.floor(random() * 6);
    chunks.push(text.slice(at, at + size));
    at += size;
  }
  return chunks;
}

describe("the reasoning splitter on text", () => {
  const text = "<think>\nThe user greets me. I greet back.\n</think>\n\nHello there!";

  test("separates the think block from the answer, dropping the tags and the whitespace around them", () => {
    const out = split([text]);
    assert.equal(out.reasoning, "The user greets me. I greet back.");
    assert.equal(out.content, "Hello there!");
  });

  test("gives the same split for every way the text can be cut in two, and for random chunkings", () => {
    for (let at = 0; at <= text.length; at++) {
      const out = split([text.slice(0, at), text.slice(at)]);
      assert.equal(out.reasoning, "The user greets me. I greet back.", `cut at ${at}`);
      assert.equal(out.content, "Hello there!", `cut at ${at}`);
    }
    const random = prng(7);
    for (let i = 0; i < 300; i++) {
      const out = split(randomChunks(text, random));
      assert.equal(out.reasoning, "The user greets me. I greet back.");
      assert.equal(out.content, "Hello there!");
    }
  });

  test("counts as reasoning the tokens up to and including the closing tag", () => {
    // One character per token, so the count is exact: every character up to the end of "</think>".
    const chars = [...text];
    const out = split(chars);
    const closeEnd = text.indexOf("</think>") + "</think>".length;
    assert.equal(out.reasoningTokens, closeEnd);
    assert.equal(out.total, closeEnd);
    assert.equal(out.reasoningTokens + out.contentTokens, chars.length);
  });

  test("an unterminated think block is all reasoning, and so are its tokens", () => {
    const out = split([..."<think>\nStill thinking about </thi"], {}, 2);
    assert.equal(out.reasoning, "Still thinking about </thi");
    assert.equal(out.content, "");
    assert.equal(out.reasoningTokens, "<think>\nStill thinking about </thi".length + 2);
    assert.equal(out.contentTokens, 0);
  });

  test("a prompt that opened <think> makes the output reasoning from its first token", () => {
    const out = split([..."Let me see.\n</think>\n\n42"], { startsInReasoning: true });
    assert.equal(out.reasoning, "Let me see.");
    assert.equal(out.content, "42");
    assert.equal(out.reasoningTokens, "Let me see.\n</think>".length);
  });

  test("output without a think block passes through unchanged, leading whitespace and all", () => {
    for (const plain of ["\n Hello", "<tool_call>[]</tool_call>", "<", "<thi", "a <think>b</think> c", "   "]) {
      const out = split([...plain]);
      assert.equal(out.content, plain);
      assert.equal(out.reasoning, "");
      assert.equal(out.reasoningTokens, 0);
      assert.equal(out.contentTokens, plain.length);
    }
  });

  test("disabled (grammar-bound output), even a leading think tag is content", () => {
    const out = split(["<think>x</think>y"], { enabled: false, startsInReasoning: true });
    assert.equal(out.content, "<think>x</think>y");
    assert.equal(out.reasoning, "");
  });

  test("an empty think block (thinking turned off) leaves only the answer and no reasoning", () => {
    const out = split([..."<think>\n\n</think>\n\nHi"]);
    assert.equal(out.reasoning, "");
    assert.equal(out.content, "Hi");
  });

  test("whitespace inside the reasoning is kept; only the ends are trimmed", () => {
    const out = split(["<think>  a \n", "\n b  ", " </think>  c"]);
    assert.equal(out.reasoning, "a \n\n b");
    assert.equal(out.content, "c");
  });

  test("a second think block right after the first is reasoning too", () => {
    const out = split([..."<think>one</think>\n<think>two</think>answer"]);
    assert.equal(out.reasoning, "onetwo");
    assert.equal(out.content, "answer");
  });
});

/**
 * The same, on real token streams: a text tokenized by a real model's tokenizer (where the tags
 * fall across several tokens), detokenized token by token through the engine's TextStream exactly
 * as a generation is, then split.
 */
describe("the reasoning splitter on real token streams", () => {
  const models = new Map<string, LoadedModel>();
  before(async () => {
    const modelsDir = resolveModelsDir();
    for (const entry of (await loadCatalog()).filter((e) => e.id === SMOLLM2 || e.id === GEMMA)) {
      const pulled = await findPulledModel(entry, modelsDir);
      assert.ok(pulled, `${entry.id} is pulled (npm test pulls it first)`);
      models.set(entry.id, loadModel(pulled.path));
    }
  });
  after(async () => {
    for (const model of models.values()) model.free();
  });

  const reasoning = "The user asks for 17 × 3. 17 × 3 = 51, döne — 🌍 fine.";
  const answer = "17 × 3 = **51**.";
  const output = `<think>\n${reasoning}\n</think>\n\n${answer}`;

  for (const id of [SMOLLM2, GEMMA]) {
    test(`${id}: the tags span several tokens, and the split and the reasoning-token count are exact`, () => {
      const model = models.get(id)!;
      const tokens = model.tokenize(output);
      const openTokens = model.tokenize("<think>");
      const detokenize = detokenizer(model);
      assert.ok(openTokens.length > 1, `'<think>' is ${openTokens.length} tokens in ${id}: the tag falls across token boundaries`);

      const stream = new TextStream(detokenize, []);
      const splitter = new ReasoningSplitter();
      let got = { reasoning: "", content: "", reasoningTokens: 0, contentTokens: 0 };
      let previous = 0;
      const add = (d: typeof got) =>
        (got = {
          reasoning: got.reasoning + d.reasoning,
          content: got.content + d.content,
          reasoningTokens: got.reasoningTokens + d.reasoningTokens,
          contentTokens: got.contentTokens + d.contentTokens,
        });
      for (const token of tokens) {
        const delta = stream.push(token);
        if (delta) {
          add(splitter.push(delta, stream.tokenCount - previous));
          previous = stream.tokenCount;
        }
      }
      add(splitter.push(stream.flush(), stream.tokenCount - previous));
      add(splitter.finish());

      assert.equal(got.reasoning, reasoning);
      assert.equal(got.content, answer);
      // The reasoning ends with the token that completes "</think>".
      let closing = 0;
      while (!detokenize(tokens.slice(0, closing)).includes("</think>")) closing++;
      assert.equal(got.reasoningTokens, closing);
      assert.equal(got.contentTokens, tokens.length - closing);
    });
  }
});
