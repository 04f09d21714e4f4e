/**
 * The French adapter through our server: builds it if its cache is missing or stale (setup.sh and
 * train.py beside this file), starts Switchyard with it in a catalog of its own, and asks the
 * held-out prompts (heldout.jsonl, none of them in the training data) of the base and of the
 * adapter, greedy, printing the two answers side by side.
 *
 *   node --import tsx bench/adapters/french/try.ts [--max-tokens 48]
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { FRENCH_ADAPTER, FRENCH_BASE, prepareFrenchAdapter } from "../../adapter-mix.js";
import { streamChatBody } from "../../load/client-stream.js";
import { startSwitchyard } from "../../peers/targets.js";

const { values } = parseArgs({ options: { "max-tokens": { type: "string", default: "48" }, port: { type: "string", default: "18470" } } });
const prompts = readFileSync(join(import.meta.dirname, "heldout.jsonl"), "utf8")
  .split("\n")
  .filter(Boolean)
  .map((line) => (JSON.parse(line) as { prompt: string }).prompt);

const catalog = prepareFrenchAdapter();
const server = await startSwitchyard(
  {
    modelId: FRENCH_BASE,
    modelPath: "",
    threads: 2,
    parallel: 4,
    contextPerSequence: 2048,
    port: Number(values.port),
    alsoServe: [FRENCH_ADAPTER],
  },
  "switchyard",
  { SWITCHYARD_CATALOG: catalog },
);
try {
  for (const prompt of prompts) {
    console.log(`\n${prompt}`);
    for (const model of [FRENCH_BASE, FRENCH_ADAPTER]) {
      const reply = await streamChatBody(
        { ...server.target, model },
        { messages: [{ role: "user", content: prompt }], max_tokens: Number(values["max-tokens"]), temperature: 0 },
      );
      if (!reply.ok) throw new Error(`${model}: ${reply.status} ${reply.errorMessage ?? reply.errorCode}`);
      console.log(`  ${model === FRENCH_BASE ? "base   " : "adapter"}: ${JSON.stringify(reply.content)}`);
    }
  }
} finally {
  await server.stop();
}
