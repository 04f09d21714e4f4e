/**
 * An OpenAI-compatible chat upstream that does no work: its first content chunk goes out
 * `--ttft-ms` after the request (a prefill's wait, on a timer), then one chunk every `--itl-ms`.
 * Behind it, the gateway's added latency is measured without an engine's run-to-run noise
 * (llama-server's TTFT on this machine varies by more than the gateway adds). Serves
 * `POST /v1/chat/completions` (streamed) and `GET /v1/models` and `/health`; a benchmark peer,
 * never a test double.
 *
 *   node --import tsx bench/peers/instant-upstream.ts --port 18600 [--ttft-ms 20] [--itl-ms 5]
 */
import { createServer, type ServerResponse } from "node:http";
import { Command } from "commander";

const opts = new Command()
  .requiredOption("--port <n>", "port on 127.0.0.1")
  .option("--ttft-ms <ms>", "delay before the first content chunk", "20")
  .option("--itl-ms <ms>", "delay between content chunks", "5")
  .parse()
  .opts<{ port: string; ttftMs: string; itlMs: string }>();

const event = (payload: unknown) => `data: ${JSON.stringify(payload)}\n\n`;
const chunk = (delta: Record<string, string>, finishReason: string | null = null) =>
  event({
    id: "chatcmpl-instant",
    object: "chat.completion.chunk",
    created: 0,
    model: "instant",
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  });

function stream(res: ServerResponse, maxTokens: number, promptChars: number): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.write(chunk({ role: "assistant", content: "" }));
  let sent = 0;
  const next = () => {
    if (res.destroyed) return;
    if (sent < maxTokens) {
      res.write(chunk({ content: ` w${sent++}` }));
      setTimeout(next, Number(opts.itlMs));
      return;
    }
    res.write(chunk({}, "length"));
    const usage = {
      prompt_tokens: Math.ceil(promptChars / 4),
      completion_tokens: maxTokens,
      total_tokens: Math.ceil(promptChars / 4) + maxTokens,
    };
    res.write(event({ id: "chatcmpl-instant", object: "chat.completion.chunk", created: 0, model: "instant", choices: [], usage }));
    res.end("data: [DONE]\n\n");
  };
  setTimeout(next, Number(opts.ttftMs));
}

createServer((req, res) => {
  if (req.method === "GET") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(req.url === "/health" ? { status: "ok" } : { object: "list", data: [{ id: "instant", object: "model" }] }));
    return;
  }
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (part: string) => (body += part));
  req.on("end", () => {
    const request = JSON.parse(body) as { max_tokens?: number; messages?: unknown[] };
    stream(res, request.max_tokens ?? 16, JSON.stringify(request.messages ?? []).length);
  });
}).listen(Number(opts.port), "127.0.0.1");
