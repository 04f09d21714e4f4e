import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyReply } from "fastify";
import { stringifyJson } from "../billing/money-json.js";

/** A server-sent-events writer over the raw response; each event is one `data:` line. */
export interface SseWriter {
  send(data: unknown): void;
  /** A named event (`event:` line), as the Responses API streams them. */
  event(name: string, data: unknown): void;
  done(): void;
  /** Ends the stream with no `[DONE]` sentinel (the Responses API sends none). */
  end(): void;
}

export function openSse(reply: FastifyReply): SseWriter {
  // Headers set by hooks (x-request-id, CORS) are not sent for a hijacked reply unless copied here.
  const hookHeaders = Object.fromEntries(Object.entries(reply.getHeaders()).filter(([, v]) => v !== undefined)) as OutgoingHttpHeaders;
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    ...hookHeaders,
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    // No Connection header of our own: Node answers keep-alive or close as the client asked.
    "x-accel-buffering": "no",
  });
  raw.flushHeaders();
  const write = (text: string) => {
    if (!raw.destroyed && !raw.writableEnded) raw.write(text);
  };
  return {
    send: (data) => write(`data: ${stringifyJson(data)}\n\n`),
    event: (name, data) => write(`event: ${name}\ndata: ${stringifyJson(data)}\n\n`),
    done() {
      write("data: [DONE]\n\n");
      if (!raw.writableEnded) raw.end();
    },
    end() {
      if (!raw.writableEnded) raw.end();
    },
  };
}
