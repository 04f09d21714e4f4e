import { connect, type Socket } from "node:net";

/** What came back on a raw socket: the status line's code, the headers, the body, and whether the server closed it. */
export interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The server closed the connection (within the wait). */
  closed: boolean;
  /** Nothing at all came back before the connection closed. */
  empty: boolean;
}

export function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
    socket.once("error", reject);
  });
}

/**
 * Writes `request` (raw HTTP text) on a fresh connection and reads until the server closes it or
 * `waitMs` passes, so malformed requests that fetch would refuse to send can be tried.
 */
export async function rawExchange(url: string, request: string | ((socket: Socket) => void), waitMs: number): Promise<RawReply> {
  const socket = await openSocket(url);
  return readReply(socket, waitMs, () => (typeof request === "string" ? socket.write(request) : request(socket)));
}

/** `complete`: the reply is whole once this holds (a kept-alive socket stays open after it). */
export function readReply(
  socket: Socket,
  waitMs: number,
  start: () => void = () => {},
  complete: (text: string) => boolean = () => false,
): Promise<RawReply> {
  return new Promise((resolve) => {
    let text = "";
    let closed = false;
    const finish = () => {
      clearTimeout(timer);
      socket.removeAllListeners("data");
      resolve(parse(text, closed));
    };
    const timer = setTimeout(finish, waitMs);
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      text += chunk;
      if (complete(text)) finish();
    });
    socket.on("error", () => undefined);
    socket.once("close", () => {
      closed = true;
      finish();
    });
    start();
  });
}

/** A chunked response's last chunk has come: the server keeps the socket open for the next request. */
export const chunkedEnd = (text: string) => text.endsWith("\r\n0\r\n\r\n");

function parse(text: string, closed: boolean): RawReply {
  const split = text.indexOf("\r\n\r\n");
  const head = split === -1 ? text : text.slice(0, split);
  const [statusLine = "", ...lines] = head.split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return {
    status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0),
    headers,
    body: split === -1 ? "" : text.slice(split + 4),
    closed,
    empty: text === "",
  };
}

/** Asserts-friendly: the parsed OpenAI error body, or null when the body is not one. */
export function openAiError(body: string): { message: string; type: string; param: string | null; code: string | null } | null {
  try {
    const parsed = JSON.parse(body) as { error?: Record<string, unknown> };
    const error = parsed.error;
    if (!error || Object.keys(parsed).length !== 1) return null;
    if (typeof error.message !== "string" || typeof error.type !== "string" || !("param" in error) || !("code" in error)) return null;
    return error as { message: string; type: string; param: string | null; code: string | null };
  } catch {
    return null;
  }
}
