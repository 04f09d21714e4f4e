/**
 * The least a Node gateway can do: forward every request to the upstream over undici's kept-alive
 * pool and stream the answer back, reading nothing (no auth, no parsing, no metering). Beside our
 * gateway in bench:upstream it is the floor of a hop through one more Node process on this
 * machine: what the gateway adds past it is ours. A benchmark peer, never a test double.
 *
 *   node --import tsx bench/peers/bare-relay.ts --port 18502 --upstream http://127.0.0.1:18500
 */
import { createServer } from "node:http";
import { pipeline } from "node:stream/promises";
import { Command } from "commander";
import { Agent, request } from "undici";

const opts = new Command()
  .requiredOption("--port <n>", "port on 127.0.0.1")
  .requiredOption("--upstream <url>", "the upstream's origin")
  .parse()
  .opts<{ port: string; upstream: string }>();

const pool = new Agent({ keepAliveTimeout: 60_000, connections: 64, pipelining: 1 });

createServer((req, res) => {
  const headers = { "content-type": req.headers["content-type"] ?? "application/json" };
  request(new URL(req.url ?? "/", opts.upstream), {
    method: req.method as "GET" | "POST",
    headers,
    body: req.method === "GET" ? null : req,
    dispatcher: pool,
  })
    .then(async (answer) => {
      res.writeHead(answer.statusCode, { "content-type": String(answer.headers["content-type"] ?? "application/json") });
      await pipeline(answer.body, res);
    })
    .catch(() => res.destroy());
}).listen(Number(opts.port), "127.0.0.1");
