import { useState } from "preact/hooks";
import { useNotify } from "../feedback.js";
import { snippet, type Language } from "./code.js";

const LANGUAGES: Array<[Language, string]> = [
  ["curl", "curl"],
  ["python", "Python (openai)"],
  ["javascript", "JavaScript (openai)"],
];

export function CodeDialog({ body, onClose }: { body: Record<string, unknown>; onClose: () => void }) {
  const [language, setLanguage] = useState<Language>("curl");
  const notify = useNotify();
  const code = snippet(language, location.origin, body);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(code);
      notify("ok", "Copied.");
    } catch (error) {
      notify("error", `Could not copy: ${(error as Error).message}`);
    }
  };
  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: a click on the backdrop is a mouse shortcut; the Close button is the keyboard's way out
    // biome-ignore lint/a11y/useKeyWithClickEvents: as above
    <div
      class="overlay"
      onClick={(e) => {
        if (e.target === e.currentTarget) onClose();
      }}
    >
      <div class="card dialog" role="dialog" aria-label="View code">
        <div class="page-head">
          <h2>This request as code</h2>
          <button type="button" class="ghost" onClick={onClose} aria-label="Close">
            ✕
          </button>
        </div>
        <div class="tabs" role="tablist">
          {LANGUAGES.map(([id, label]) => (
            <button
              type="button"
              key={id}
              role="tab"
              aria-selected={language === id}
              class={language === id ? "tab active" : "tab"}
              onClick={() => setLanguage(id)}
            >
              {label}
            </button>
          ))}
        </div>
        <pre class="code" data-language={language}>
          {code}
        </pre>
        <p class="muted small">The key is read from SWITCHYARD_API_KEY; it is never written into the code.</p>
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
    </div>
  );
}
