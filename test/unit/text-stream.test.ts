import assert from "node:assert/strict";
import { test } from "node:test";
import { TextStream } from "../../src/engine/text-stream.js";

/**
 * A byte-level toy tokenizer: each token is one byte, so multi-byte characters span tokens exactly
 * as they do with real BPE vocabularies (llama.cpp returns U+FFFD for an incomplete sequence).
 */
const bytesOf = (text: string) => [...Buffer.from(text, "utf8")];
const detokenize = (tokens: readonly number[]) => Buffer.from(tokens).toString("utf8");

function run(text: string, stop: string[] = []) {
  const stream = new TextStream(detokenize as never, stop);
  const deltas: string[] = [];
  for (const byte of bytesOf(text)) {
    const delta = stream.push(byte as never);
    if (delta) deltas.push(delta);
    if (stream.hitStop) break;
  }
  const rest = stream.flush();
  if (rest) deltas.push(rest);
  return { deltas, text: deltas.join(""), hitStop: stream.hitStop, tokens: stream.tokenCount };
}

test("never splits a UTF-8 character across deltas", () => {
  const { deltas, text } = run("héllo wörld 🌍 日本語");
  assert.equal(text, "héllo wörld 🌍 日本語");
  for (const delta of deltas) assert.doesNotMatch(delta, /\uFFFD/);
});

test("a stop string ends the text exactly before it and is never emitted", () => {
  const result = run("one, two, three, four", [", three"]);
  assert.equal(result.text, "one, two");
  assert.ok(result.hitStop);
  for (const delta of result.deltas) assert.ok(!delta.includes("," + " three"));
});

test("text that could begin a stop string is held back, then released when it cannot", () => {
  const stream = new TextStream(detokenize as never, ["END"]);
  const out: string[] = [];
  for (const byte of bytesOf("a EN")) out.push(stream.push(byte as never));
  assert.equal(out.join(""), "a ", "'EN' is held: it may become END");
  out.push(stream.push(bytesOf("D")[0] as never));
  assert.ok(stream.hitStop);
  assert.equal(out.join(""), "a ");
  const other = new TextStream(detokenize as never, ["END"]);
  const released = bytesOf("ENx")
    .map((b) => other.push(b as never))
    .join("");
  assert.equal(released, "ENx");
});

test("the earliest of several stop strings wins", () => {
  assert.equal(run("abc STOP2 def STOP1", ["STOP1", "STOP2"]).text, "abc ");
});

test("held-back text is released at the end when no stop string came", () => {
  assert.equal(run("the end is nigh: EN", ["END"]).text, "the end is nigh: EN");
});

test("tokens are counted even when their text is held back", () => {
  assert.equal(run("abcdef").tokens, 6);
});
