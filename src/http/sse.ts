import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyReply } from "fastify";
import { stringifyJson } from "../protocol/money-json.js";
import type { PauseControl } from "../serving/ports.js";
import { capSendBuffer } from "./socket-buffer.js";

/** How much a streamed response may hold unsent, and how long it may stay full. */
export interface StreamLimits {
  streamBufferBytes: number;
  streamPauseTimeoutMs: number;
}

/**
 * A stream's hold on its generation, through the backend seam: paused while its client does not
 * read (the response's unsent buffer is full), resumed when the buffer drains, expired when it
 * stayed full past the pause timeout (the generation then ends with a timeout error).
 */
export class OutputGate implements PauseControl {
  paused = false;
  expired: string | undefined;
  private readonly listeners = new Set<() => void>();

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  set(paused: boolean): void {
    if (this.paused === paused || this.expired !== undefined) return;
    this.paused = paused;
    this.notify();
  }

  expire(message: string): void {
    if (this.expired !== undefined) return;
    this.expired = message;
    this.notify();
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

/** A server-sent-events writer over the raw response; each event is one `data:` line. */
export interface SseWriter {
  send(data: unknown): void;
  /** A named event (`event:` line), as the Responses API streams them. */
  event(name: string, data: unknown): void;
  done(): void;
  /** Ends the stream with no `[DONE]` sentinel (the Responses API sends none). */
  end(): void;
}

/**
 * With `flow`, the response's unsent bytes are bounded: past `streamBufferBytes` the gate pauses the
 * generation until the buffer drains (the engine gives its sequence up after its grace period);
 * still full after `streamPauseTimeoutMs`, the generation ends with a timeout error written behind
 * the unsent output (billed for what it generated), and if that is still unread after as long
 * again, the connection is closed.
 */
export function openSse(reply: FastifyReply, flow?: { gate: OutputGate; limits: StreamLimits }): SseWriter {
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
  const hold = flow && backpressure(reply, flow.gate, flow.limits);
  const write = (text: string) => {
    if (raw.destroyed || raw.writableEnded) return;
    raw.write(text);
    hold?.();
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

/** Returns the check to run after each write: pauses the gate when the buffer is over the bound. */
function backpressure(reply: FastifyReply, gate: OutputGate, limits: StreamLimits): () => void {
  const raw = reply.raw;
  // The kernel's part of the unsent bytes is bounded too (it counts the cap twice, for its bookkeeping).
  capSendBuffer(raw.socket, limits.streamBufferBytes);
  let timer: NodeJS.Timeout | undefined;
  raw.once("close", () => clearTimeout(timer));
  const seconds = Math.round(limits.streamPauseTimeoutMs / 100) / 10;
  const expire = () => {
    reply.log.warn({ buffered: raw.writableLength }, "stream not read within the pause timeout; ending its generation");
    gate.expire(`The stream's output was not read for ${seconds} s, so its generation was ended.`);
    // Its client may still come back for the error; one that does not loses the connection.
    timer = setTimeout(() => raw.destroy(), limits.streamPauseTimeoutMs);
  };
  return () => {
    // The bound is at least Node's write buffer, so a write has returned false and 'drain' will come.
    if (gate.paused || gate.expired !== undefined || raw.writableLength <= limits.streamBufferBytes) return;
    gate.set(true);
    timer = setTimeout(expire, limits.streamPauseTimeoutMs);
    raw.once("drain", () => {
      clearTimeout(timer);
      gate.set(false);
    });
  };
}
