/**
 * bench:compare's `edit` scenario: Predicted Outputs and speculative decoding on "edit replay".
 *
 * 24 fixed documents (bench/edit-docs/: TypeScript, Python, Go and prose, 300-600 tokens each),
 * each sent with a small change instruction and the request to output the whole document with
 * that change. The first pass asks at temperature 0, without a prediction. The edit pass sends the
 * same requests with `prediction` set to the first pass's answer with 1-3 lines altered (a seeded
 * rule, so every run and every target gets the same predictions): acceptance is then a property
 * of the engine, not of the model's obedience. At temperature 0 the edit pass's output is the
 * first answer again (up to rounding in other batch shapes, or on another server), and the
 * prediction differs from it only on the altered lines. The first target to run makes the first
 * pass (by default switchyard-spec-off).
 *
 * Every pass runs right after a priming pass at its concurrency (the same prompts, max_tokens 1),
 * so each starts with the prompts in whatever prompt cache the target keeps, as an editor
 * re-sending a file would find them, and passes of one target start from the same cache state.
 * How much of it survives 24 documents depends on the server's cache (see "cache hit").
 *
 * Output tokens are completion_tokens less rejected_prediction_tokens: OpenAI counts (and bills)
 * rejected prediction tokens as completion tokens, though they are not in the output.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ChatMessage } from "./load/datasets.js";
import { streamChatBody, type RequestResult, type Target } from "./load/client-stream.js";
import { seededRandom, summarize, type Summary } from "./load/stats.js";

const DOCS_DIR = join(import.meta.dirname, "edit-docs");
export const EDIT_CONCURRENCIES = [1, 8] as const;
const MAX_TOKENS = 1024;
/** llama-server with each --spec-type (bench/compare.ts starts them; "llama-server" is its default, none): the peer is the best of them. */
export const EDIT_PEERS = ["llama-server", "llama-server-ngram-simple", "llama-server-ngram-mod"];

export interface EditDoc {
  id: string;
  kind: string;
  instruction: string;
  text: string;
}

/** `count` of the documents (all 24 by default), taken in turn from each kind: 8 are the first two of each. */
export function loadEditDocs(count = Infinity): EditDoc[] {
  const manifest = JSON.parse(readFileSync(join(DOCS_DIR, "manifest.json"), "utf8")) as {
    documents: Array<{ file: string; kind: string; instruction: string }>;
  };
  const docs = manifest.documents.map((d) => ({
    id: d.file.replace(/\.txt$/, ""),
    kind: d.kind,
    instruction: d.instruction,
    text: readFileSync(join(DOCS_DIR, d.file), "utf8"),
  }));
  const rank = new Map<EditDoc, number>();
  const seen = new Map<string, number>();
  for (const d of docs) {
    rank.set(d, seen.get(d.kind) ?? 0);
    seen.set(d.kind, (seen.get(d.kind) ?? 0) + 1);
  }
  const chosen = new Set([...docs].sort((a, b) => rank.get(a)! - rank.get(b)!).slice(0, count));
  return docs.filter((d) => chosen.has(d));
}

export function editMessages(doc: EditDoc): ChatMessage[] {
  return [
    {
      role: "system",
      content:
        "You edit documents. Apply the requested change and output the complete document with that change, exactly as it was otherwise: no explanation, no code fences, nothing before or after it.",
    },
    { role: "user", content: `Change: ${doc.instruction}\n\nDocument:\n${doc.text}` },
  ];
}

function seedOf(id: string): number {
  return createHash("sha256").update(id).digest().readUInt32LE(0);
}

/**
 * The first answer with 1-3 of its non-blank lines altered, chosen and changed by a rule seeded
 * with the document's id: the line's first number goes up by one; a line with no number gets "2"
 * appended to its last word of three letters or more; any other line gets " x" appended.
 */
export function alterPrediction(answer: string, id: string): { text: string; alteredLines: number[] } {
  const random = seededRandom(seedOf(id));
  const lines = answer.split("\n");
  const candidates = lines.map((line, i) => (line.trim().length >= 4 ? i : -1)).filter((i) => i >= 0);
  const wanted = Math.min(candidates.length, 1 + Math.floor(random() * 3));
  const chosen = new Set<number>();
  while (chosen.size < wanted) chosen.add(candidates[Math.floor(random() * candidates.length)]!);
  for (const i of chosen) {
    const line = lines[i]!;
    const number = /\d+/.exec(line);
    if (number) {
      const value = number[0].length <= 15 ? String(Number(number[0]) + 1) : number[0].slice(0, -1) + ((Number(number[0].at(-1)) + 1) % 10);
      lines[i] = line.slice(0, number.index) + value + line.slice(number.index + number[0].length);
      continue;
    }
    const words = [...line.matchAll(/[A-Za-z_][A-Za-z0-9_]{2,}/g)];
    const last = words.at(-1);
    lines[i] = last ? `${line.slice(0, last.index + last[0].length)}2${line.slice(last.index + last[0].length)}` : `${line} x`;
  }
  return { text: lines.join("\n"), alteredLines: [...chosen].sort((a, b) => a - b) };
}

export interface ExactnessRow {
  target: string;
  prediction: boolean;
  concurrency: number;
  compared: number;
  mismatches: number;
  /** The documents whose output differs. */
  mismatched: string[];
  /** The first difference: the document, the character offset, and the text around it on each side. */
  firstMismatch: { id: string; at: number; reference: string; output: string } | null;
}

/** A target's way through the scenario: which edit passes it runs. */
export interface EditVariant {
  /** Sends `prediction` (llama-server receives it and ignores it). */
  prediction: boolean;
}

export interface EditPassReport {
  target: string;
  pass: "first" | "edit";
  prediction: boolean;
  concurrency: number;
  documents: number;
  completed: number;
  failed: Record<string, number>;
  /** The first refusal's message, e.g. a 400 naming `prediction`. */
  firstError?: string;
  durationS: number;
  /** Tokens in the outputs: completion_tokens less rejected_prediction_tokens. */
  outputTokens: number;
  /** usage.completion_tokens, summed (rejected prediction tokens included). */
  completionTokens: number;
  /** Output tokens over the pass's wall time. */
  outputTokensPerS: number;
  /** Output tokens over the time after each request's first token, summed (c1: the decode rate). */
  decodeTokensPerS: number;
  ttftMs: Summary;
  e2eMs: Summary;
  /** Cached prompt tokens over prompt tokens; null when the server reports none. */
  prefixCacheHitRate: number | null;
  /** Sums of usage.completion_tokens_details.accepted/rejected_prediction_tokens, where reported. */
  acceptedPredictionTokens: number | null;
  rejectedPredictionTokens: number | null;
  /** llama-server's timings.draft_n and draft_n_accepted, summed, where reported. */
  draftTokens: number | null;
  draftAcceptedTokens: number | null;
  /** Our /metrics vllm:spec_decode_* counters over the pass (all models and tiers), where exported. */
  specDecode: { drafts: number; draftTokens: number; acceptedTokens: number } | null;
  /** Per document: output tokens (as above), time to first token and to the end, prediction counts. */
  perDocument: Array<{
    id: string;
    ok: boolean;
    outputTokens: number;
    ttftMs: number | null;
    e2eMs: number;
    accepted: number | null;
    rejected: number | null;
  }>;
}

export interface PassRun {
  report: EditPassReport;
  outputs: Array<string | null>;
}

/** Holds the run's first answers and predictions, shared by every target, and every pass's outputs. */
export class EditBench {
  readonly docs: EditDoc[];
  firstPassTarget: string | null = null;
  firstAnswers: string[] | null = null;
  predictions: Array<{ text: string; alteredLines: number[] }> | null = null;
  readonly passes: PassRun[] = [];

  constructor(documents?: number) {
    this.docs = loadEditDocs(documents);
  }

  /** Makes the first answers if no target has yet, then runs each variant at c1 and c8, each pass after a priming pass. */
  async runTarget(target: Target, variants: EditVariant[], log: (line: string) => void): Promise<void> {
    await this.prepare(target, log);
    for (const concurrency of EDIT_CONCURRENCIES) {
      for (const variant of variants) {
        log(`${target.name}: edit pass c${concurrency}${variant.prediction ? " with prediction" : ""}...`);
        const run = await this.measure(target, concurrency, variant.prediction);
        log(`  ${summaryLine(run.report)}`);
      }
    }
  }

  /** The first pass (c1, no prediction) on `target`, whose answers, altered, are every edit pass's predictions; once per run. */
  async prepare(target: Target, log: (line: string) => void): Promise<void> {
    if (this.firstAnswers) return;
    log(`${target.name}: edit, first pass...`);
    await this.prime(target, 1);
    const first = await this.pass(target, { prediction: null, concurrency: 1, maxTokens: MAX_TOKENS });
    log(`  ${summaryLine(first.report)}`);
    this.passes.push({ report: { ...first.report, pass: "first" }, outputs: first.outputs });
    this.firstPassTarget = target.name;
    this.firstAnswers = first.outputs.map((o) => o ?? "");
    this.predictions = this.firstAnswers.map((answer, i) => alterPrediction(answer, this.docs[i]!.id));
  }

  /** One edit pass at `concurrency`, after a priming pass, with or without the predictions (after `prepare`). */
  async measure(target: Target, concurrency: number, prediction: boolean): Promise<PassRun> {
    if (!this.predictions) throw new Error("EditBench.measure before prepare");
    await this.prime(target, concurrency);
    const run = await this.pass(target, {
      prediction: prediction ? this.predictions.map((p) => p.text) : null,
      concurrency,
      maxTokens: MAX_TOKENS,
    });
    this.passes.push(run);
    return run;
  }

  /** The pass's prompts with max_tokens 1, unmeasured (a refusal shows again in the pass that follows). */
  private async prime(target: Target, concurrency: number): Promise<void> {
    await this.pass(target, { prediction: null, concurrency, maxTokens: 1 });
  }

  private async pass(target: Target, p: { prediction: string[] | null; concurrency: number; maxTokens: number }): Promise<PassRun> {
    // A counter appears in /metrics once it has counted: none before means zero.
    const before = (await specDecodeCounters(target)) ?? { drafts: 0, draftTokens: 0, acceptedTokens: 0 };
    const results: RequestResult[] = new Array(this.docs.length);
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(p.concurrency, this.docs.length) }, async () => {
        while (next < this.docs.length) {
          const i = next++;
          const prediction = p.prediction?.[i];
          results[i] = await streamChatBody(target, {
            messages: editMessages(this.docs[i]!),
            max_tokens: p.maxTokens,
            temperature: 0,
            ...(prediction ? { prediction: { type: "content", content: prediction } } : {}),
          });
        }
      }),
    );
    const durationS = (performance.now() - started) / 1000;
    const after = await specDecodeCounters(target);
    const details = (r: RequestResult, field: string): number | null => {
      const value = (r.usage?.completion_tokens_details as Record<string, unknown> | undefined)?.[field];
      return typeof value === "number" ? value : null;
    };
    const ok = results.filter((r) => r.ok);
    const refused = results.find((r) => !r.ok);
    const failed: Record<string, number> = {};
    for (const r of results.filter((x) => !x.ok))
      failed[r.errorCode ?? String(r.status)] = (failed[r.errorCode ?? String(r.status)] ?? 0) + 1;
    const outputOf = (r: RequestResult) => r.outputTokens - (details(r, "rejected_prediction_tokens") ?? 0);
    const outputTokens = ok.reduce((a, r) => a + outputOf(r), 0);
    const decodeMs = ok.reduce((a, r) => a + (r.e2eMs - (r.ttftMs ?? r.e2eMs)), 0);
    const cached = ok.filter((r) => r.cachedTokens !== undefined);
    const timing = (r: RequestResult, field: string): number | null =>
      typeof r.timings?.[field] === "number" ? (r.timings[field] as number) : null;
    const sum = (values: Array<number | null>) =>
      values.some((v) => v !== null) ? values.reduce<number>((a, v) => a + (v ?? 0), 0) : null;
    const report: EditPassReport = {
      target: target.name,
      pass: "edit",
      prediction: p.prediction !== null,
      concurrency: p.concurrency,
      documents: this.docs.length,
      completed: ok.length,
      failed,
      ...(refused ? { firstError: `${refused.status} ${refused.errorMessage ?? refused.errorCode}` } : {}),
      durationS,
      outputTokens,
      completionTokens: ok.reduce((a, r) => a + r.outputTokens, 0),
      outputTokensPerS: outputTokens / durationS,
      decodeTokensPerS: decodeMs > 0 ? outputTokens / (decodeMs / 1000) : NaN,
      ttftMs: summarize(ok.filter((r) => r.ttftMs !== undefined).map((r) => r.ttftMs!)),
      e2eMs: summarize(ok.map((r) => r.e2eMs)),
      prefixCacheHitRate: cached.length
        ? cached.reduce((a, r) => a + r.cachedTokens!, 0) /
          Math.max(
            1,
            cached.reduce((a, r) => a + r.promptTokens, 0),
          )
        : null,
      acceptedPredictionTokens: sum(ok.map((r) => details(r, "accepted_prediction_tokens"))),
      rejectedPredictionTokens: sum(ok.map((r) => details(r, "rejected_prediction_tokens"))),
      draftTokens: sum(ok.map((r) => timing(r, "draft_n"))),
      draftAcceptedTokens: sum(ok.map((r) => timing(r, "draft_n_accepted"))),
      specDecode: after
        ? {
            drafts: after.drafts - before.drafts,
            draftTokens: after.draftTokens - before.draftTokens,
            acceptedTokens: after.acceptedTokens - before.acceptedTokens,
          }
        : null,
      perDocument: results.map((r, i) => ({
        id: this.docs[i]!.id,
        ok: r.ok,
        outputTokens: outputOf(r),
        ttftMs: r.ttftMs ?? null,
        e2eMs: r.e2eMs,
        accepted: details(r, "accepted_prediction_tokens"),
        rejected: details(r, "rejected_prediction_tokens"),
      })),
    };
    return { report, outputs: results.map((r) => (r.ok ? r.content : null)) };
  }

  private find(target: string, prediction: boolean, concurrency: number): PassRun | undefined {
    return this.passes.find(
      (p) =>
        p.report.pass === "edit" &&
        p.report.target === target &&
        p.report.prediction === prediction &&
        p.report.concurrency === concurrency,
    );
  }

  /**
   * Temperature-0 outputs of every pass against the reference: our edit pass with speculation off
   * at c1 (or, without that target, the first pass: the same requests). Speculation off at c8 shows
   * what batching alone changes (a sequence's logits may round differently in a larger batch).
   * Peers' passes are compared too, for information: a different server may round differently.
   */
  exactness(): { reference: string; rows: ExactnessRow[] } | null {
    const off = this.find("switchyard-spec-off", false, 1);
    const reference = off ? off.outputs : this.firstAnswers;
    if (!reference) return null;
    const rows = this.passes
      .filter((p) => p !== off && (off || p.report.pass !== "first"))
      .map((p) => {
        let compared = 0;
        let mismatches = 0;
        let firstMismatch: ExactnessRow["firstMismatch"] = null;
        const mismatched: string[] = [];
        p.outputs.forEach((output, i) => {
          const expected = reference[i];
          if (output === null || expected === null || expected === undefined) return;
          compared++;
          if (output === expected) return;
          mismatches++;
          mismatched.push(this.docs[i]!.id);
          let at = 0;
          while (at < output.length && output[at] === expected[at]) at++;
          firstMismatch ??= {
            id: this.docs[i]!.id,
            at,
            reference: expected.slice(Math.max(0, at - 40), at + 80),
            output: output.slice(Math.max(0, at - 40), at + 80),
          };
        });
        return {
          target: p.report.target + (p.report.pass === "first" ? " (first pass)" : ""),
          prediction: p.report.prediction,
          concurrency: p.report.concurrency,
          compared,
          mismatches,
          mismatched,
          firstMismatch,
        };
      });
    return { reference: off ? "switchyard-spec-off, edit pass c1" : `${this.firstPassTarget}, first pass`, rows };
  }

  /** A pass's output tok/s, where every request of it was answered. */
  private rate(target: string, prediction: boolean, concurrency: number): number | undefined {
    const pass = this.find(target, prediction, concurrency);
    return pass && pass.report.completed === pass.report.documents ? pass.report.outputTokensPerS : undefined;
  }

  /** The fastest of the llama-server targets at a concurrency (its passes carry `prediction`, which it ignores). */
  bestPeer(concurrency: number, peers = EDIT_PEERS): { name: string; rate: number } | undefined {
    const rated = peers
      .map((name) => ({ name, rate: this.rate(name, true, concurrency) ?? this.rate(name, false, concurrency) }))
      .filter((r): r is { name: string; rate: number } => r.rate !== undefined);
    return rated.sort((a, b) => b.rate - a.rate)[0];
  }

  /** The issue's targets for this scenario, as ratios; null where a side did not run. */
  ratios(): Record<string, number | null> {
    const rate = this.rate.bind(this);
    const ratio = (a: number | undefined, b: number | undefined) =>
      a !== undefined && b !== undefined && b > 0 ? Number((a / b).toFixed(2)) : null;
    const peer1 = this.bestPeer(1);
    const peer8 = this.bestPeer(8);
    const exact = this.exactness();
    /** Documents whose output differs from the reference in any of these passes of "switchyard" (auto, with or without prediction). */
    const differing = (concurrency: number) => {
      const rows = exact?.rows.filter((r) => r.target === "switchyard" && r.concurrency === concurrency) ?? [];
      return rows.length ? new Set(rows.flatMap((r) => r.mismatched)).size : null;
    };
    const offAtC8 = exact?.rows.find((r) => r.target === "switchyard-spec-off" && r.concurrency === 8);
    return {
      "edit c1 out tok/s: prediction vs speculation off (target >= 2.0)": ratio(
        rate("switchyard", true, 1),
        rate("switchyard-spec-off", false, 1),
      ),
      "edit c1 out tok/s: prediction vs llama-server's best --spec-type (target >= 1.3)": ratio(rate("switchyard", true, 1), peer1?.rate),
      "edit c8 out tok/s: prediction vs llama-server's best --spec-type (target >= 1.2)": ratio(rate("switchyard", true, 8), peer8?.rate),
      "edit c1 out tok/s: auto, no prediction, vs speculation off": ratio(
        rate("switchyard", false, 1),
        rate("switchyard-spec-off", false, 1),
      ),
      "edit c8 out tok/s: auto, no prediction, vs speculation off": ratio(
        rate("switchyard", false, 8),
        rate("switchyard-spec-off", false, 8),
      ),
      "edit c1 out tok/s: auto, no prediction, vs llama-server's best": ratio(rate("switchyard", false, 1), peer1?.rate),
      "edit c8 out tok/s: auto, no prediction, vs llama-server's best": ratio(rate("switchyard", false, 8), peer8?.rate),
      "edit, temperature 0, c1: documents whose output, auto or with prediction, differs from speculation off (target 0)": differing(1),
      "edit, temperature 0, c8: documents whose output, auto or with prediction, differs from speculation off at c1": differing(8),
      "edit, temperature 0: documents whose output with speculation off differs at c8 from c1 (batching alone)": offAtC8
        ? offAtC8.mismatches
        : null,
    };
  }

  tableRows(): Array<Record<string, unknown>> {
    const round = (n: number | null | undefined, d = 1) =>
      n === null || n === undefined || !Number.isFinite(n) ? null : Number(n.toFixed(d));
    return this.passes.map(({ report: r }) => ({
      target: r.target,
      pass: r.pass === "first" ? "first" : `edit${r.prediction ? "+pred" : ""}`,
      c: r.concurrency,
      ok: `${r.completed}/${r.documents}`,
      failed: Object.entries(r.failed)
        .map(([code, n]) => `${code}:${n}`)
        .join(" "),
      "out tok/s": round(r.outputTokensPerS),
      "decode tok/s": round(r.decodeTokensPerS),
      "out tok": r.outputTokens,
      "ttft p50": round(r.ttftMs.p50, 0),
      "ttft mean": round(r.ttftMs.mean, 0),
      "total s": round(r.durationS),
      "cache hit": round(r.prefixCacheHitRate, 2),
      "accepted/rejected": r.acceptedPredictionTokens !== null ? `${r.acceptedPredictionTokens}/${r.rejectedPredictionTokens}` : "",
      "drafted/accepted": r.specDecode
        ? `${r.specDecode.draftTokens}/${r.specDecode.acceptedTokens}`
        : r.draftTokens !== null
          ? `${r.draftTokens}/${r.draftAcceptedTokens}`
          : "",
    }));
  }

  toJSON() {
    return {
      bestPeer: { c1: this.bestPeer(1)?.name ?? null, c8: this.bestPeer(8)?.name ?? null },
      documents: this.docs.map((d, i) => ({
        id: d.id,
        kind: d.kind,
        instruction: d.instruction,
        alteredLines: this.predictions?.[i]?.alteredLines ?? null,
      })),
      maxTokens: MAX_TOKENS,
      firstPassTarget: this.firstPassTarget,
      firstAnswers: this.firstAnswers,
      predictions: this.predictions?.map((p) => p.text) ?? null,
      passes: this.passes.map((p) => p.report),
      exactness: this.exactness(),
    };
  }
}

function summaryLine(r: EditPassReport): string {
  const accepted =
    r.acceptedPredictionTokens !== null ? `, prediction accepted/rejected ${r.acceptedPredictionTokens}/${r.rejectedPredictionTokens}` : "";
  return `${r.completed}/${r.documents} ok, ${r.outputTokens} tokens in ${r.durationS.toFixed(1)} s: ${r.outputTokensPerS.toFixed(1)} out tok/s, TTFT p50 ${r.ttftMs.p50.toFixed(0)} ms${accepted}${r.firstError ? `; refused: ${r.firstError}` : ""}`;
}

/** Our /metrics speculative-decoding counters summed over their labels; null for a server without them. */
async function specDecodeCounters(target: Target): Promise<{ drafts: number; draftTokens: number; acceptedTokens: number } | null> {
  const text = await fetch(new URL("/metrics", target.baseURL))
    .then((r) => (r.ok ? r.text() : ""))
    .catch(() => "");
  const total = (name: string) => {
    const values = [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, "gm"))].map((m) => Number(m[1]));
    return values.length ? values.reduce((a, b) => a + b, 0) : null;
  };
  const drafts = total("vllm:spec_decode_num_drafts_total");
  const draftTokens = total("vllm:spec_decode_num_draft_tokens_total");
  const acceptedTokens = total("vllm:spec_decode_num_accepted_tokens_total");
  return drafts === null || draftTokens === null || acceptedTokens === null ? null : { drafts, draftTokens, acceptedTokens };
}
