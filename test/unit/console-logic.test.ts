import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { csvCell, csvRow } from "../../console/src/csv.js";
import { addDays, multiplyDecimal } from "../../console/src/format.js";
import { snippet } from "../../console/src/playground/code.js";
import { buildRequest, DEFAULT_SETTINGS, defaultModel } from "../../console/src/playground/request.js";
import type { WireModel } from "../../console/src/wire.js";
import { buckets, parseMetrics, quantileBetween, total } from "../../console/src/prometheus.js";

/** The console's pure pieces: what it computes from /metrics, the requests it builds, the code it shows. */
describe("console: reading /metrics", () => {
  const scrape = (counts: number[], tokens: number) =>
    parseMetrics(
      [
        "# HELP vllm:time_to_first_token_seconds Time to first token.",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        ...[0.1, 0.5, 1].map((le, i) => `vllm:time_to_first_token_seconds_bucket{le="${le}",model_name="m/a",tier="default"} ${counts[i]}`),
        `vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m/a",tier="default"} ${counts[3]}`,
        `vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m/b",tier="default"} 99`,
        `vllm:generation_tokens_total{model_name="m/a",tier="default"} ${tokens}`,
        `vllm:generation_tokens_total{model_name="m/a",tier="flex"} 5`,
      ].join("\n"),
    );

  test("samples keep their labels; totals sum the matching series only", () => {
    const samples = scrape([1, 2, 3, 3], 40);
    assert.equal(total(samples, "vllm:generation_tokens_total", { model_name: "m/a" }), 45);
    assert.equal(total(samples, "vllm:generation_tokens_total", { model_name: "m/a", tier: "flex" }), 5);
    assert.equal(buckets(samples, "vllm:time_to_first_token_seconds", { model_name: "m/a" }).get(Infinity), 3);
  });

  test("quantiles come from the observations between two scrapes, interpolated within a bucket", () => {
    const match = { model_name: "m/a" };
    const before = buckets(scrape([10, 10, 10, 10], 0), "vllm:time_to_first_token_seconds", match);
    // Since then: 4 observations in (0.1, 0.5], 4 in (0.5, 1].
    const after = buckets(scrape([10, 14, 18, 18], 0), "vllm:time_to_first_token_seconds", match);
    assert.equal(quantileBetween(before, after, 0.5), 0.5);
    assert.ok(Math.abs(quantileBetween(before, after, 0.25)! - 0.3) < 1e-12);
    assert.equal(quantileBetween(before, after, 1), 1);
    assert.equal(quantileBetween(before, before, 0.5), null, "nothing observed: no quantile");
  });
});

describe("console: playground requests and their code", () => {
  test("settings become the API's parameters; empty ones are left out", () => {
    const body = buildRequest(
      { ...DEFAULT_SETTINGS, model: "m/a", system: "Be brief.", seed: "3", stop: "END\n###", tier: "flex", maxTokens: "" },
      [{ role: "user", content: "Hi" }],
      true,
    );
    assert.deepEqual(body, {
      model: "m/a",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
      ],
      temperature: 0.7,
      top_p: 1,
      seed: 3,
      stop: ["END", "###"],
      service_tier: "flex",
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  test("JSON mode with a schema; a schema that does not parse is refused before sending", () => {
    const body = buildRequest({ ...DEFAULT_SETTINGS, model: "m/a", jsonMode: "json_schema", schema: '{"type":"object"}' }, [], false);
    assert.deepEqual(body.response_format, {
      type: "json_schema",
      json_schema: { name: "answer", schema: { type: "object" }, strict: true },
    });
    assert.throws(() => buildRequest({ ...DEFAULT_SETTINGS, jsonMode: "json_schema", schema: "{" }, [], false), /schema does not parse/);
    assert.throws(() => buildRequest({ ...DEFAULT_SETTINGS, seed: "1.5" }, [], false), /seed must be a whole number/);
  });

  test("View code: curl, Python and JS send the same body and read the key from the environment", () => {
    const body = buildRequest(
      { ...DEFAULT_SETTINGS, model: "m/a", jsonMode: "json_object", seed: "1" },
      [{ role: "user", content: "It's" }],
      true,
    );
    const curl = snippet("curl", "http://h:1", body);
    assert.match(curl, /^curl http:\/\/h:1\/v1\/compat\/chat\/completions/);
    assert.match(curl, /"Authorization: Bearer \$SWITCHYARD_API_KEY"/);
    assert.deepEqual(JSON.parse(/-d '([\s\S]*)'$/.exec(curl)![1]!.replace(/'\\''/g, "'")), body);
    const python = snippet("python", "http://h:1", body);
    assert.match(python, /api_key=os\.environ\["SWITCHYARD_API_KEY"\]/);
    assert.match(python, /stream=True,/);
    assert.match(python, /"include_usage": True/);
    const js = snippet("javascript", "http://h:1", body);
    assert.match(js, /apiKey: process\.env\.SWITCHYARD_API_KEY/);
    assert.match(js, /"response_format": \{\n\s+"type": "json_object"/);
  });
});

test("console: the playground starts on the assistant (qwen2.5-coder-0.5b) once it is ready, else on the first ready model", () => {
  const model = (id: string, status: "loading" | "ready", aliases: string[]) =>
    ({ id, metadata: { status, aliases } }) as unknown as WireModel;
  const smol = model("HuggingFaceTB/SmolLM2-135M-Instruct", "ready", ["smollm2-135m"]);
  const qwen = (status: "loading" | "ready") => model("Qwen/Qwen2.5-Coder-0.5B-Instruct", status, ["qwen2.5-coder-0.5b"]);
  assert.equal(defaultModel([smol, qwen("ready")]), "Qwen/Qwen2.5-Coder-0.5B-Instruct");
  assert.equal(defaultModel([smol, qwen("loading")]), "HuggingFaceTB/SmolLM2-135M-Instruct");
  assert.equal(defaultModel([qwen("loading")]), "Qwen/Qwen2.5-Coder-0.5B-Instruct");
  assert.equal(defaultModel([]), "");
});

test("console: list price × tier multiplier is exact; days step in UTC", () => {
  assert.equal(multiplyDecimal("0.02", "1.5"), "0.03");
  assert.equal(multiplyDecimal("0.44", "0.8"), "0.352");
  assert.equal(multiplyDecimal("3", "1"), "3");
  assert.equal(multiplyDecimal("0.000001", "0.8"), "0.0000008");
  assert.equal(addDays("2026-02-28", 1), "2026-03-01");
  assert.equal(addDays("2026-03-01", -1), "2026-02-28");
});

describe("console: the usage CSV export", () => {
  test("cells a spreadsheet would run as a formula get a leading quote (issue 20's key names)", () => {
    for (const name of ['=HYPERLINK("http://evil","x")', "+1+1", "-2+3", "@SUM(A1)", "\tinjected", "\r=1", "=1"]) {
      const cell = csvCell(name);
      assert.ok(/^"?'/.test(cell), `${JSON.stringify(name)} -> ${cell}`);
    }
    assert.equal(csvCell("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
    assert.equal(csvCell("-x"), "'-x");
    assert.equal(csvCell("@handle"), "'@handle");
  });

  test("plain numbers, negative ones included, and ordinary text stay as they are", () => {
    for (const value of ["-0.5", "-12", "0.000014357", "42", "2026-01-05", "ci-key", "meta/llama"]) assert.equal(csvCell(value), value);
    assert.equal(csvCell(7), "7");
    assert.equal(csvCell("-1e5"), "'-1e5", "an exponent is not a plain number");
  });

  test("quoting: commas, quotes and newlines are quoted after neutralising", () => {
    assert.equal(csvCell('a,"b"'), '"a,""b"""');
    assert.equal(csvCell("=1,2"), `"'=1,2"`);
    assert.equal(csvCell("line\nbreak"), '"line\nbreak"');
    assert.equal(csvRow(["2026-01-05", "=evil", 3, "-0.25"]), "2026-01-05,'=evil,3,-0.25");
  });
});
