/**
 * bench:ab: this checkout against a base, on the same scenarios, in interleaved rounds.
 *
 *   npm run bench:ab -- --base <git ref> [--scenarios cached-c16,random-c16,...] [--rounds 4] [--peer]
 *   npm run bench:ab -- --base . --base-env SWITCHYARD_SPECULATION=off      # one checkout, two settings
 *   npm run bench:ab -- --head main --base main~3                            # two commits, whatever the working tree holds
 *   npm run bench:ab -- --base main~1 --scenarios edit-c1,edit-c8 --edit-docs 8   # Predicted Outputs (bench/ab/edit-scenarios.ts)
 *
 * The base is built once per commit outside the repository (bench/ab/checkout.ts). Both servers
 * (and llama-server with --peer) are started at once and stay up; each round runs every scenario on
 * each side back to back, the order reversed every other time (A B, B A), with the same seeded
 * prompts on both sides. For each measure it prints the median of the per-round ratios (head ÷
 * base) and their spread, and says "worse" only when every round agrees. llama-batched-bench's
 * ceiling for each scenario's shape is measured first, alone, where it is built.
 *
 * Writes bench/results/ab-<time>.json. Run it before landing a change under src/engine/ or on the
 * request path; a loss over 3% on any scenario needs a written reason (docs/development/benchmarks.md).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Command } from "commander";
import { builtCheckout, buildHead, parseEnv } from "./ab/checkout.js";
import { EDIT_SCENARIO, EditScenarios } from "./ab/edit-scenarios.js";
import { changePercent, judge, MEASURES, median, type Compared } from "./ab/verdict.js";
import { ceilingsFor, type Ceiling } from "./load/ceilings.js";
import { runScenario, type Scenario } from "./load/scenario.js";
import { scenarioSet, WARM_UP } from "./load/scenarios.js";
import type { Target } from "./load/client-stream.js";
import { cpuDescription, cpuVariant, listedModelPath, startLlamaServer, startSwitchyard, type RunningTarget } from "./peers/targets.js";

const opts = new Command()
  .requiredOption("--base <ref>", "git ref to compare against ('.' = this working tree, with --base-env)")
  .option("--head <ref>", "git ref to measure ('.' = this working tree, rebuilt)", ".")
  .option("--base-env <list>", "KEY=VALUE,... for the base's server")
  .option("--head-env <list>", "KEY=VALUE,... for this checkout's server")
  .option(
    "--scenarios <list>",
    "scenarios of bench/load/scenarios.ts, and edit-c<N>",
    "cached-c16,random-c16,random-c1,openai-c16,openai-c1",
  )
  .option("--edit-docs <n>", "edit-c<N> scenarios: how many of bench/edit-docs' 24 documents", "8")
  .option("--rounds <n>", "interleaved rounds", "4")
  .option("--peer", "llama-server too (bench/peers/build-llama-server.sh), as a third side")
  .option("--no-ceilings", "skip llama-batched-bench")
  .option("--model <id>", "catalog id", "HuggingFaceTB/SmolLM2-135M-Instruct")
  .option("--threads <n>", "llama.cpp threads", "2")
  .option("--parallel <n>", "sequences (llama-server: slots)", "16")
  .option("--context <n>", "tokens per sequence", "2048")
  .option("--quick", "a quarter of the requests")
  .option("--out <prefix>", "where results go", `bench/results/ab-${new Date().toISOString().replace(/[:.]/g, "-")}`)
  .parse()
  .opts<{
    base: string;
    head: string;
    baseEnv?: string;
    headEnv?: string;
    scenarios: string;
    editDocs: string;
    rounds: string;
    peer?: boolean;
    ceilings: boolean;
    model: string;
    threads: string;
    parallel: string;
    context: string;
    quick?: boolean;
    out: string;
  }>();

const names = opts.scenarios.split(",");
const edit = names.some((name) => EDIT_SCENARIO.test(name)) ? new EditScenarios(Number(opts.editDocs)) : null;
/** A scenario by name, and how one side runs it (`seed`: the round's, for a load scenario's prompts). */
interface AbScenario {
  name: string;
  run: (target: Target, seed: number) => Promise<Compared>;
}
const scenarios: AbScenario[] = names.flatMap((name): AbScenario[] => {
  if (edit && EDIT_SCENARIO.test(name)) return [{ name, run: (target) => edit.run(target, name) }];
  const found = scenarioSet(opts.quick === true)[name];
  if (!found) throw new Error(`no scenario ${name}`);
  return found.map((scenario) => ({ name: scenario.name, run: (target, seed) => runScenario(target, scenario, seed) }));
});
const loadScenarios: Scenario[] = names.flatMap((name) => scenarioSet(opts.quick === true)[name] ?? []);
const base = builtCheckout(opts.base);
const head = builtCheckout(opts.head);
if (opts.head === "." || opts.base === ".") buildHead();
const peer = {
  modelId: opts.model,
  modelPath: listedModelPath(opts.model),
  threads: Number(opts.threads),
  parallel: Number(opts.parallel),
  contextPerSequence: Number(opts.context),
  port: 18500,
};
const ceilings = opts.ceilings ? ceilingsFor(peer, loadScenarios) : new Map<string, Ceiling>();
const sides: RunningTarget[] = [];
try {
  sides.push(await startSwitchyard({ ...peer }, "head", parseEnv(opts.headEnv), head.dir));
  sides.push(await startSwitchyard({ ...peer, port: peer.port + 1 }, "base", parseEnv(opts.baseEnv), base.dir));
  if (opts.peer) {
    const server = await startLlamaServer({ ...peer, port: peer.port + 2 });
    if (server) sides.push(server);
    else process.stderr.write("llama-server is not built (bench/peers/build-llama-server.sh): running without it\n");
  }
  for (const side of sides) await runScenario(side.target, WARM_UP);
  await edit?.prepare(sides[0]!.target);
  const reports = await interleaved(sides, scenarios, Number(opts.rounds));
  summarize(reports);
} finally {
  for (const side of sides) await side.stop();
}

/** Every round runs every scenario on every side, back to back, reversing the order each time. */
async function interleaved(running: RunningTarget[], list: AbScenario[], rounds: number): Promise<Compared[][][]> {
  const byRound: Compared[][][] = [];
  let flip = false;
  for (let round = 0; round < rounds; round++) {
    const perScenario: Compared[][] = [];
    for (const scenario of list) {
      const seed = [...scenario.name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7) + 7919 * round;
      const order = flip ? [...running].reverse() : running;
      flip = !flip;
      const reports = new Map<RunningTarget, Compared>();
      for (const side of order) {
        process.stderr.write(`round ${round + 1}/${rounds}: ${side.target.name} ${scenario.name}...\n`);
        reports.set(side, await scenario.run(side.target, seed));
      }
      perScenario.push(running.map((side) => reports.get(side)!));
    }
    byRound.push(perScenario);
  }
  return byRound;
}

function summarize(byRound: Compared[][][]): void {
  const names = sides.map((s) => s.target.name);
  const rows = scenarios.flatMap((scenario, s) =>
    MEASURES.map((measure) => {
      const values = (side: number) => byRound.map((round) => measure.of(round[s]![side]!));
      const ratio = (side: number) => values(0).map((v, round) => v / values(side)[round]!);
      const judged = judge(ratio(1), measure.higherIsBetter);
      const ceiling = ceilings.get(scenario.name);
      return {
        scenario: scenario.name,
        measure: measure.name,
        ...Object.fromEntries(names.map((name, side) => [name, round(median(values(side)), 1)])),
        "head ÷ base": judged ? round(judged.median, 3) : null,
        spread: judged ? `${round(judged.min, 3)}..${round(judged.max, 3)}` : "",
        change: judged ? changePercent(judged.median, measure.higherIsBetter) : "",
        verdict: judged?.verdict ?? "",
        ...(names.length > 2 ? { "head ÷ llama-server": round(median(ratio(2)), 3) } : {}),
        ...(ceiling && measure.name === "out tok/s"
          ? Object.fromEntries(names.map((name, side) => [`${name} ÷ limit`, round(median(values(side)) / ceiling.limit, 2)]))
          : {}),
      };
    }),
  );
  console.table(rows);
  for (const [name, c] of ceilings)
    console.log(
      `ceiling ${name}: S_PP ${c.sPp}, S_TG ${c.sTg} tok/s (${c.sequences} x ${c.prompt}/${c.generate}); limit ${round(c.limit, 1)} out tok/s`,
    );
  const cpu = cpuDescription();
  console.log(`head: ${opts.head} = ${head.commit} ${opts.headEnv ?? ""}; base: ${opts.base} = ${base.commit} ${opts.baseEnv ?? ""}`);
  console.log(
    `CPU: ${cpu.model}; flags: ${cpu.flags.join(" ")}; ggml variant: ${sides.map((s) => `${s.target.name} ${cpuVariant(s.target.pid) ?? "?"}`).join(", ")}`,
  );
  mkdirSync("bench/results", { recursive: true });
  const json = {
    at: new Date().toISOString(),
    cpu,
    options: opts,
    base: base.commit,
    ceilings: Object.fromEntries(ceilings),
    rows,
    rounds: byRound,
  };
  writeFileSync(`${opts.out}.json`, JSON.stringify(json, null, 2));
  console.log(`wrote ${opts.out}.json`);
}

function round(n: number, digits: number): number | null {
  return Number.isFinite(n) ? Number(n.toFixed(digits)) : null;
}
