import { createHash } from "node:crypto";

/**
 * One upstream replica's health as the gateway sees it: a circuit breaker. A replica is `down`
 * after a connection failure (it is likely gone), after CONSECUTIVE_FAILURES answers of 5xx, or
 * when a health check fails; while down it takes no requests, except one trial request each time
 * its cooldown (doubling from MIN_COOLDOWN_MS up to MAX_COOLDOWN_MS) has passed. A passing health
 * check or a successful request brings it back `up`.
 */
export const CONSECUTIVE_FAILURES = 3;
const MIN_COOLDOWN_MS = 2_000;
const MAX_COOLDOWN_MS = 30_000;

export type ReplicaHealth = "up" | "down";

export class Replica {
  running = 0;
  /** Requests this replica has been given since start. */
  served = 0;
  health: ReplicaHealth = "up";
  private failures = 0;
  private cooldownMs = MIN_COOLDOWN_MS;
  private retryAt = 0;
  private trialInFlight = false;

  constructor(
    readonly index: number,
    readonly baseUrl: string,
    readonly maxConcurrency: number,
  ) {}

  get hasFreeSlot(): boolean {
    return this.running < this.maxConcurrency;
  }

  /** May take a request now: up, or down with its cooldown over and no trial running. */
  available(now = Date.now()): boolean {
    return this.health === "up" || (!this.trialInFlight && now >= this.retryAt);
  }

  /** A request is sent to it; a down replica's request is its trial. */
  take(): void {
    this.running++;
    this.served++;
    if (this.health === "down") this.trialInFlight = true;
  }

  /** The request ended: `ok`, `failed` (a fault of the replica), or `neutral` (the caller's doing, or a 4xx). */
  release(outcome: "ok" | "failed" | "neutral", fatal = false): void {
    this.running--;
    this.trialInFlight = false;
    if (outcome === "ok") this.succeeded();
    else if (outcome === "failed") this.failed(fatal);
  }

  succeeded(): void {
    this.health = "up";
    this.failures = 0;
    this.cooldownMs = MIN_COOLDOWN_MS;
  }

  /** `fatal`: the replica could not be reached or dropped the connection. */
  failed(fatal = false): void {
    this.failures++;
    if (!fatal && this.failures < CONSECUTIVE_FAILURES && this.health === "up") return;
    if (this.health === "down") this.cooldownMs = Math.min(this.cooldownMs * 2, MAX_COOLDOWN_MS);
    this.health = "down";
    this.retryAt = Date.now() + this.cooldownMs;
  }
}

/**
 * Rendezvous (highest random weight) hashing: each key ranks the replicas by hash(key, replica);
 * a key keeps its replica as others come and go, and only the keys of a replica that leaves move.
 */
export function rendezvousOrder(key: string, replicas: readonly Replica[]): Replica[] {
  const weight = (r: Replica) => createHash("sha256").update(key).update("\u0000").update(r.baseUrl).digest().readBigUInt64BE(0);
  return replicas
    .map((r) => ({ r, w: weight(r) }))
    .sort((a, b) => (a.w === b.w ? 0 : a.w > b.w ? -1 : 1))
    .map((x) => x.r);
}
