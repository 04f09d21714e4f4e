import { useState } from "preact/hooks";
import { call, messageOf } from "../api.js";
import { ErrorBox } from "../feedback.js";
import { saveSession, type Session } from "../session.js";

/**
 * Paste an account's API key; the console checks it by listing models, exactly as any client would.
 * It never asks for the admin key: the Engines page, the one operator view, reads /health and
 * /metrics, which need no key, and is linked from here.
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
      await call(trimmed, "/v1/compat/models");
      const session: Session = { key: trimmed };
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
          Paste an API key (<code>sk-sy-…</code>, printed by <code>npm start</code> or <code>switchyard keys create</code>). It stays in
          this tab's session storage and is sent only in the Authorization header.
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
        <p class="muted">
          Operators: the <a href="#/engines">Engines</a> page needs no key.
        </p>
      </form>
    </div>
  );
}
