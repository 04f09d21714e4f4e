/**
 * What one dedicated instance costs in memory, and whether this machine has that much left. An
 * instance holds the model's weights and one KV stream of `context` cells per sequence (f16 keys
 * and values in every layer: 23,040 bytes a cell for SmolLM2-135M, so 32 sequences × 8192 cells
 * are 6.0 GB), plus compute buffers. It is checked before every load, so a deployment that
 * cannot fit is refused with a 400 instead of the kernel killing the server.
 */
import { readFileSync } from "node:fs";
import { freemem, totalmem } from "node:os";
import { InvalidRequest } from "../errors.js";
import type { KvShape } from "./gguf-shape.js";

/** llama.cpp's default cache type: f16 keys and values. */
const KV_BYTES_PER_VALUE = 2;
/** Compute buffers, logits and the runner threads' stacks of one instance, measured at ~150 MB for SmolLM2; rounded up. */
export const INSTANCE_OVERHEAD_BYTES = 256 * 1024 * 1024;
const MIB = 1024 * 1024;

export function kvBytesPerCell(shape: KvShape): number {
  return shape.layers * shape.kvHeads * (shape.keyLength + shape.valueLength) * KV_BYTES_PER_VALUE;
}

/** Weights (the GGUF's size: counted in full, though another copy's mmapped pages may be shared) + KV + overhead. */
export function instanceBytes(input: { fileBytes: number; shape: KvShape; sequences: number; cellsPerSequence: number }): number {
  return input.fileBytes + kvBytesPerCell(input.shape) * input.sequences * input.cellsPerSequence + INSTANCE_OVERHEAD_BYTES;
}

/**
 * Memory the machine can still give: /proc/meminfo's MemAvailable (os.freemem() elsewhere), and
 * no more than the cgroup's limit leaves when there is one.
 */
export function machineAvailableBytes(): number {
  let available = freemem();
  try {
    const match = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
    if (match) available = Number(match[1]) * 1024;
  } catch {
    // Not Linux: freemem() it is.
  }
  try {
    const limit = readFileSync("/sys/fs/cgroup/memory.max", "utf8").trim();
    const used = Number(readFileSync("/sys/fs/cgroup/memory.current", "utf8").trim());
    if (limit !== "max" && Number.isFinite(used)) available = Math.min(available, Number(limit) - used);
  } catch {
    // No cgroup v2 limit.
  }
  return available;
}

/** Left free for the server itself and everything else: 1 GiB or 10% of the machine, the larger. */
export function headroomBytes(): number {
  return Math.max(1024 * MIB, Math.floor(totalmem() / 10));
}

/**
 * Admits instance loads against what is left. With `limitBytes` (SWITCHYARD_DEPLOYMENT_MEMORY_BYTES)
 * deployments on this process share that many bytes, counted by their estimates; without it, what
 * the machine has available now less the headroom, less the estimates of instances still loading
 * (a loaded one already shows in the machine's figure).
 */
export class MemoryGuard {
  private held = 0;
  private loading = 0;

  constructor(
    private readonly limitBytes: number | undefined,
    private readonly available: () => number = machineAvailableBytes,
  ) {}

  /** Bytes a new instance may take now. */
  left(): number {
    if (this.limitBytes !== undefined) return this.limitBytes - this.held;
    return this.available() - headroomBytes() - this.loading;
  }

  /** A 400 when `count` instances of `bytes` each cannot fit. */
  check(bytes: number, count = 1): void {
    const left = this.left();
    if (bytes * count <= left) return;
    const gb = (n: number) => `${(Math.max(0, n) / 1e9).toFixed(2)} GB`;
    throw new InvalidRequest(
      `Not enough memory on this server: ${count} instance(s) of ${gb(bytes)} each (weights plus KV cache for max_batch_size sequences ` +
        `of context_length tokens) need ${gb(bytes * count)}, and ${gb(left)} is left for deployments. Lower max_batch_size, context_length or min_instances.`,
      "max_batch_size",
      "insufficient_memory",
    );
  }

  /** Checks, then counts `bytes` as taken until the returned release; loaded() once it has been allocated. */
  hold(bytes: number): { loaded(): void; release(): void } {
    this.check(bytes);
    this.held += bytes;
    this.loading += bytes;
    let loading = true;
    let held = true;
    const loaded = () => {
      if (loading) this.loading -= bytes;
      loading = false;
    };
    return {
      loaded,
      release: () => {
        loaded();
        if (held) this.held -= bytes;
        held = false;
      },
    };
  }
}
