import type { Socket } from "node:net";
import koffi from "koffi";

// Linux's <sys/socket.h> on x86-64 and arm64.
const SOL_SOCKET = 1;
const SO_SNDBUF = 7;

type SetSockOpt = (fd: number, level: number, name: number, value: Int32Array, length: number) => number;
let setsockopt: SetSockOpt | null | undefined;

function bind(): SetSockOpt | null {
  try {
    return koffi.load("libc.so.6").func("int setsockopt(int fd, int level, int name, const void *value, uint32_t length)") as SetSockOpt;
  } catch {
    return null;
  }
}

/**
 * Caps the kernel's send buffer of a streamed response's socket. Linux grows it with the
 * connection's window up to net.ipv4.tcp_wmem's maximum (4 MiB by default), so a client that
 * never reads would otherwise park megabytes of its stream in the kernel before the server sees any
 * backpressure. Node has no option for it, so it is set through libc; elsewhere (or if that fails)
 * the kernel's own sizing stays, and only the user-space bound applies. Returns whether it was set.
 */
export function capSendBuffer(socket: Socket | null, bytes: number): boolean {
  if (process.platform !== "linux" || !socket) return false;
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) return false;
  setsockopt ??= bind();
  return setsockopt?.(fd, SOL_SOCKET, SO_SNDBUF, Int32Array.of(bytes), 4) === 0;
}
