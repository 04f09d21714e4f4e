/**
 * The signed-in key lives in this tab's sessionStorage only: never a cookie (so the browser never
 * sends it by itself), never a URL, gone when the tab closes.
 */
export interface Session {
  /** An account's API key. The console never asks for the admin key: no page of it needs one. */
  key: string;
}

const STORE_KEY = "switchyard.console.session";

export function loadSession(): Session | null {
  try {
    const parsed = JSON.parse(sessionStorage.getItem(STORE_KEY) ?? "null") as Session | null;
    // A session an older console saved with the admin key ({role: "admin"}) is dropped, not reused.
    return parsed && typeof parsed.key === "string" && (parsed as { role?: string }).role !== "admin" ? { key: parsed.key } : null;
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
