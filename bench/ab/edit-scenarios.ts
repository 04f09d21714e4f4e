import type { Target } from "../load/client-stream.js";
import { summarize } from "../load/stats.js";
import { EditBench } from "../edit.js";
import type { Compared } from "./verdict.js";

/**
 * bench:ab's edit scenarios: `edit-c1`, `edit-c8` (any concurrency) are bench/edit.ts's edit pass
 * with `prediction` at that concurrency, so an engine change is A/B'd on Predicted Outputs too.
 * The first pass (the answers the predictions alter) runs once, on the first side, before the rounds;
 * every side then gets the same predictions. Inter-token latency is not measured by an edit pass.
 */
export const EDIT_SCENARIO = /^edit-c(\d+)$/;

export class EditScenarios {
  private readonly bench: EditBench;

  constructor(documents: number) {
    this.bench = new EditBench(documents);
  }

  /** Makes the first answers on `target` (once). */
  prepare(target: Target): Promise<void> {
    return this.bench.prepare(target, (line) => process.stderr.write(`${line}\n`));
  }

  /** One edit pass of scenario `name` (edit-c<N>) on `target`. */
  async run(target: Target, name: string): Promise<Compared> {
    const concurrency = Number(EDIT_SCENARIO.exec(name)![1]);
    const { report } = await this.bench.measure(target, concurrency, true);
    if (report.completed < report.documents) process.stderr.write(`${target.name} ${name}: ${report.completed}/${report.documents} ok\n`);
    return { outputTokensPerS: report.outputTokensPerS, ttftMs: report.ttftMs, itlMs: summarize([]), tpotMs: summarize([]) };
  }
}
