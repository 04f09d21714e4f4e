import assert from "node:assert/strict";
import { join } from "node:path";
import { homedir } from "node:os";
import { after, before, describe, it } from "node:test";
import { getLlama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import { SequencePool } from "../../src/engine/sequence-pool.js";

/** The pool against a real llama.cpp context of SmolLM2 with three sequences (the test setup pulled the model). */
const MODEL = join(process.env.SWITCHYARD_MODELS_DIR ?? join(homedir(), ".cache/switchyard/models"), "HuggingFaceTB--SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");

describe("sequence pool: per-namespace prefix reuse and LRU eviction on a real context", () => {
  let model: LlamaModel;
  const tokens = (text: string) => model.tokenize(text);

  before(async () => {
    const llama = await getLlama({ gpu: false, build: "never" });
    model = await llama.loadModel({ modelPath: MODEL });
  });
  after(async () => {
    await model?.dispose();
  });
  /** A fresh context of three sequences for each test. */
  const withContext = (test: (context: LlamaContext) => Promise<void>) => async () => {
    const context = await model.createContext({ sequences: 3, contextSize: 512, threads: 1 });
    try {
      await test(context);
    } finally {
      await context.dispose();
    }
  };

  /** Takes a sequence for `prompt`, evaluates what is not cached, and gives it back cached. */
  async function serve(pool: SequencePool, namespace: string, prompt: Token[]) {
    const taken = await pool.take(namespace, prompt);
    await taken.sequence.evaluateWithoutGeneratingNewTokens(prompt.slice(taken.reusedTokens));
    return taken;
  }

  it("reuses a prefix only within its namespace, keeps one token to evaluate, and evicts the least recently used idle sequence", withContext(async (context) => {
    const pool = new SequencePool(context, true);
    const conversation = tokens("The history of the lighthouse begins in the year 1850, when the harbour");
    const first = await serve(pool, "alice", conversation);
    assert.equal(first.reusedTokens, 0);
    await pool.give(first.sequence, "alice", true);
    assert.equal(pool.stats().idle, 1);

    // Another namespace never gets alice's cells, even for the very same prompt.
    const bob = await serve(pool, "bob", conversation);
    assert.equal(bob.reusedTokens, 0);
    assert.notEqual(bob.sequence, first.sequence);

    // Alice's next turn extends her prompt: everything cached is reused.
    const longer = [...conversation, ...tokens(" was finally opened to ships")];
    const again = await serve(pool, "alice", longer);
    assert.equal(again.sequence, first.sequence);
    assert.equal(again.reusedTokens, conversation.length);

    // The same prompt exactly: all but the last token, whose logits start the generation.
    await pool.give(again.sequence, "alice", true);
    const same = await pool.take("alice", longer);
    assert.equal(same.reusedTokens, longer.length - 1);
    assert.equal(same.sequence.nextTokenIndex, longer.length - 1, "the cells past the reused prefix were erased");

    // Three sequences: alice's (in use), bob's (in use), one never created. Filling up then evicts the oldest idle one.
    await pool.give(bob.sequence, "bob", true); // idle, older
    const carol = await serve(pool, "carol", tokens("Carol asks about something else entirely"));
    assert.notEqual(carol.sequence, same.sequence, "a sequence in use is never handed out");
    await pool.give(carol.sequence, "carol", true); // idle, newer
    const dave = await pool.take("dave", tokens("Dave too"));
    assert.equal(dave.sequence, bob.sequence, "the least recently used idle sequence was evicted");
    assert.equal(dave.reusedTokens, 0);
    assert.equal(dave.sequence.nextTokenIndex, 0, "evicted cells are cleared before reuse");
    const carolAgain = await pool.take("carol", tokens("Carol asks about something else entirely, again"));
    assert.ok(carolAgain.reusedTokens > 0, "the newer idle sequence was kept");
  }));

  it("with the cache off, nothing is kept", withContext(async (context) => {
    const pool = new SequencePool(context, false);
    const prompt = tokens("A prompt that would be worth caching");
    const first = await serve(pool, "alice", prompt);
    await pool.give(first.sequence, "alice", true);
    assert.equal(pool.stats().idle, 0);
    const second = await pool.take("alice", prompt);
    assert.equal(second.reusedTokens, 0);
    assert.equal(second.sequence.nextTokenIndex, 0);
    await pool.give(second.sequence, "alice", false);
  }));
});
