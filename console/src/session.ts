/**
 * The signed-in key lives in this tab's sessionStorage only: never a cookie (so the browser never
 * sends it by itself), never a URL, gone when the tab closes.
 */
export type Role = "user" | "admin";

export interface Session {
  key: string;
  role: Role;
}

const STORE_KEY = "switchyard.console.session";

export function loadSession(): Session | null {
  try {
    const parsed = JSON.parse(sessionStorage.getItem(STORE_KEY) ?? "null") as Session | null;
    return parsed && typeof parsed.key === "string" && (parsed.role === "user" || parsed.role === "admin") ? parsed : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session): void {
  sessionStorage.setItem(STORE_KEY, JSON.stringify(session));
}

export function clearSession(): void {
  sessionStorage.removeItem(STORE_KEY);
}
