import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { ConnectionCaps } from "../config/settings.js";
import { ServiceError } from "../errors.js";

export type { ConnectionCaps };

interface TrackedConnection {
  /** Requests on it whose response has not ended (more than one when pipelined). */
  busy: number;
  /** Whom it is attributed to: the key and account of the first request on it that authenticated. */
  owner?: { keyId: string; accountId: string };
}

/** The accounting each connection belongs to, so markAuthenticated can find it from a request's socket. */
const accountingOf = new WeakMap<Socket, ConnectionAccounting>();

/**
 * Open connections in all, per key and per account, and which are idle (no request in flight:
 * before the first request or between kept-alive ones), oldest idle first. Like nginx when its
 * connections run short, a new connection that finds the process near its total closes the
 * longest-idle one, so a tenant's idle pool cannot keep others out; only when every connection is
 * busy and the total is reached is the new one refused.
 */
export class ConnectionAccounting {
  private readonly open = new Map<Socket, TrackedConnection>();
  /** Insertion order is the order they went idle: the first is the longest idle. */
  private readonly idle = new Set<Socket>();
  private readonly byKey = new Map<string, number>();
  private readonly byAccount = new Map<string, number>();
  /** Idle connections closed to make room, and new ones refused with every connection busy. */
  evicted = 0;
  refused = 0;

  constructor(private readonly caps: ConnectionCaps) {}

  get openCount(): number {
    return this.open.size;
  }

  /** Starts counting a server's connections and requests; sets its keep-alive timeout. */
  install(server: Server): void {
    server.keepAliveTimeout = this.caps.keepAliveTimeoutMs;
    server.on("connection", (socket: Socket) => this.accept(socket));
    server.on("request", (request: IncomingMessage, response: ServerResponse) => this.started(request.socket, response));
  }

  /** A new connection: counted, or destroyed when the total is reached and none is idle to make room. */
  accept(socket: Socket): void {
    if (socket.destroyed) return;
    if (this.open.size >= this.caps.total - this.caps.reserve) this.evictLongestIdle();
    if (this.open.size >= this.caps.total) {
      this.refused++;
      socket.destroy();
      return;
    }
    this.open.set(socket, { busy: 0 });
    this.idle.add(socket);
    accountingOf.set(socket, this);
    socket.once("close", () => this.closed(socket));
  }

  /**
   * Attributes the connection to the caller of a request on it that authenticated; throws 429
   * `too_many_connections` (the response then closes the connection) when that would put the key or
   * its account over its cap. The first key that authenticates on a connection keeps it: a later
   * request with another key is served on it without moving it, as nginx's limit_conn counts a
   * connection once.
   */
  attribute(socket: Socket, keyId: string, accountId: string): void {
    const tracked = this.open.get(socket);
    if (!tracked || tracked.owner) return;
    const keyHeld = this.byKey.get(keyId) ?? 0;
    const accountHeld = this.byAccount.get(accountId) ?? 0;
    if (keyHeld >= this.caps.perKey || accountHeld >= this.caps.perAccount) {
      const [what, cap] = keyHeld >= this.caps.perKey ? ["this API key", this.caps.perKey] : ["this account's keys", this.caps.perAccount];
      throw new ServiceError(
        429,
        "rate_limit_error",
        `Too many open connections for ${what} (at most ${cap}); reuse or close connections you hold. This connection is closed.`,
        "too_many_connections",
        null,
        { connection: "close" },
      );
    }
    tracked.owner = { keyId, accountId };
    this.byKey.set(keyId, keyHeld + 1);
    this.byAccount.set(accountId, accountHeld + 1);
  }

  private started(socket: Socket, response: ServerResponse): void {
    const tracked = this.open.get(socket);
    if (!tracked) return;
    tracked.busy++;
    this.idle.delete(socket);
    response.once("close", () => {
      tracked.busy--;
      // Re-added last: the order of the set stays the order they went idle.
      if (tracked.busy === 0 && this.open.has(socket)) this.idle.add(socket);
    });
  }

  private evictLongestIdle(): void {
    const oldest = this.idle.values().next();
    if (oldest.done) return;
    this.evicted++;
    this.closed(oldest.value);
    oldest.value.destroy();
  }

  private closed(socket: Socket): void {
    const tracked = this.open.get(socket);
    if (!tracked) return;
    this.open.delete(socket);
    this.idle.delete(socket);
    if (!tracked.owner) return;
    release(this.byKey, tracked.owner.keyId);
    release(this.byAccount, tracked.owner.accountId);
  }
}

function release(counts: Map<string, number>, id: string): void {
  const left = (counts.get(id) ?? 1) - 1;
  if (left <= 0) counts.delete(id);
  else counts.set(id, left);
}

/** Attributes a socket to a key and account, if its server counts connections (see ConnectionAccounting.attribute). */
export function attributeConnection(socket: Socket, keyId: string, accountId: string): void {
  accountingOf.get(socket)?.attribute(socket, keyId, accountId);
}
