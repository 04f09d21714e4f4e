import { useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api.js";
import { ErrorBox } from "../feedback.js";
import { saveSession, type Session } from "../session.js";

/**
 * Paste a key; the console finds out what it is by asking the API, exactly as any client would:
 * an account key can list models, the admin key can list keys through the admin API.
 */
export function SignInPage({ onSignedIn }: { onSignedIn: (session: Session) => void }) {
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    const trimmed = key.trim();
    if (!trimmed) return setError("Paste an API key first.");
    // A header cannot carry spaces or non-ASCII characters; say so rather than fail in fetch.
    if (/[^\x21-\x7e]/.test(trimmed)) return setError("That is not an API key: keys are one word of plain ASCII characters.");
    setBusy(true);
    setError(null);
    try {
      const role = await roleOf(trimmed);
      const session: Session = { key: trimmed, role };
      saveSession(session);
      onSignedIn(session);
    } catch (failure) {
      setError(messageOf(failure));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="signin">
      <form class="card signin-card" onSubmit={submit}>
        <h1>Switchyard console</h1>
        <p class="muted">
          Paste an API key (<code>sk-sy-…</code>, printed by <code>npm start</code> or <code>switchyard keys create</code>) or the
          admin key. It stays in this tab's session storage and is sent only in the Authorization header.
        </p>
        <label>
          API key
          <input
            type="password"
            name="api-key"
            autocomplete="off"
            spellcheck={false}
            value={key}
            onInput={(e) => setKey((e.target as HTMLInputElement).value)}
            placeholder="sk-sy-…"
          />
        </label>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
        <ErrorBox error={error} />
      </form>
    </div>
  );
}

async function roleOf(key: string): Promise<Session["role"]> {
  try {
    await call(key, "/v1/compat/models");
    return "user";
  } catch (asUser) {
    if (!(asUser instanceof ApiError) || asUser.status !== 401) throw asUser;
    try {
      // An account name that cannot exist (names have no spaces): the admin key gets an empty list, cheaply.
      await call(key, "/admin/v1/keys?account=%20");
      return "admin";
    } catch {
      // Neither: the API's own answer to the key, as an API key, is the message to show.
      throw asUser;
    }
  }
}
