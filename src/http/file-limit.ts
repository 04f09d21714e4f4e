import koffi from "koffi";

// Linux's <sys/resource.h> on x86-64 and arm64: RLIMIT_NOFILE, and struct rlimit of two rlim_t (uint64).
const RLIMIT_NOFILE = 7;
const RLIM_INFINITY = 2n ** 64n - 1n;

interface Rlimit {
  rlim_cur: number | bigint;
  rlim_max: number | bigint;
}
interface Libc {
  getrlimit: (resource: number, limit: Rlimit) => number;
  setrlimit: (resource: number, limit: Rlimit) => number;
}
let libc: Libc | null | undefined;

function bind(): Libc | null {
  if (process.platform !== "linux" || (process.arch !== "x64" && process.arch !== "arm64")) return null;
  try {
    const lib = koffi.load("libc.so.6");
    const rlimit = koffi.struct("switchyard_rlimit", { rlim_cur: "uint64", rlim_max: "uint64" });
    return {
      getrlimit: lib.func("int getrlimit(int resource, _Out_ switchyard_rlimit *limit)") as Libc["getrlimit"],
      setrlimit: lib.func("int setrlimit(int resource, const switchyard_rlimit *limit)") as Libc["setrlimit"],
    };
  } catch {
    return null;
  }
}

/** What the open-file limit was and is: `soft` is what the process may open now. */
export interface FileLimit {
  /** The soft limit found at start. */
  before: number;
  /** The soft limit now. */
  soft: number;
  /** The hard limit (Infinity when unlimited). */
  hard: number;
  /** The soft limit was raised by this call. */
  raised: boolean;
}

const toNumber = (value: number | bigint) => (BigInt(value) === RLIM_INFINITY ? Infinity : Number(value));

/** The process's RLIMIT_NOFILE, or null where it cannot be read (not Linux x86-64/arm64). */
export function readFileLimit(): { soft: number; hard: number } | null {
  libc ??= bind();
  if (!libc) return null;
  const limit: Rlimit = { rlim_cur: 0, rlim_max: 0 };
  if (libc.getrlimit(RLIMIT_NOFILE, limit) !== 0) return null;
  return { soft: toNumber(limit.rlim_cur), hard: toNumber(limit.rlim_max) };
}

/**
 * Raises the soft RLIMIT_NOFILE to the hard limit, as far as the kernel allows: every open
 * connection is a descriptor, and the soft limit (often 1024) would otherwise cap connections long
 * before memory does. Node already does so at start on Linux, so this mostly confirms it; it matters
 * when something lowered the limit since. An unlimited hard limit is left alone (the kernel refuses a
 * soft limit above fs.nr_open). Returns null where the limit cannot be read.
 */
export function raiseFileLimit(): FileLimit | null {
  const found = readFileLimit();
  if (!found) return null;
  const result = { before: found.soft, soft: found.soft, hard: found.hard, raised: false };
  if (found.soft >= found.hard || !Number.isFinite(found.hard)) return result;
  if (libc!.setrlimit(RLIMIT_NOFILE, { rlim_cur: found.hard, rlim_max: found.hard }) !== 0) return result;
  const now = readFileLimit();
  return now ? { ...result, soft: now.soft, raised: now.soft > found.soft } : result;
}
