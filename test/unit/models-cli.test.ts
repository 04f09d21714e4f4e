import assert from "node:assert/strict";
import { test } from "node:test";
import { cli } from "../helpers/server.js";

test("models list names each model's aliases, the assistant's among them", () => {
  const [header, ...rows] = cli(["models", "list"]).trimEnd().split("\n");
  assert.match(header!, /^ID\s+ALIASES\s+CONTEXT\s+PRECISION/);
  assert.match(rows[0]!, /^HuggingFaceTB\/SmolLM2-135M-Instruct\s+smollm2-135m\s+8192\s/);
  assert.match(rows[1]!, /^Qwen\/Qwen2\.5-Coder-0\.5B-Instruct\s+qwen2\.5-coder-0\.5b\s+32768\s.*yes \(/);
});

test("models pull takes an alias (here re-verifying the cached file), and names an unknown one", () => {
  const pulled = cli(["models", "pull", "smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct"]).trimEnd().split("\n");
  assert.equal(pulled.length, 1, "an alias and its id are one model, pulled once");
  assert.match(pulled[0]!, /^HuggingFaceTB\/SmolLM2-135M-Instruct\s+98\.4 MB\s+\//);
  assert.throws(() => cli(["models", "pull", "no-such-alias"]), /unknown model 'no-such-alias'/);
});
