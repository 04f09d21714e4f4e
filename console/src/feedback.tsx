import { createContext } from "preact";
import { useCallback, useContext, useState } from "preact/hooks";

/** Every action reports back: a short notice, green for done, red with the API's message for a failure. */
export interface Notice {
  id: number;
  kind: "ok" | "error" | "info";
  text: string;
}

type Notify = (kind: Notice["kind"], text: string) => void;

const NotifyContext = createContext<Notify>(() => {});

export function useNotify(): Notify {
  return useContext(NotifyContext);
}

let nextId = 1;

export function FeedbackProvider({ children }: { children: preact.ComponentChildren }) {
  const [notices, setNotices] = useState<Notice[]>([]);
  const notify = useCallback<Notify>((kind, text) => {
    const id = nextId++;
    setNotices((list) => [...list.slice(-3), { id, kind, text }]);
    setTimeout(() => setNotices((list) => list.filter((n) => n.id !== id)), kind === "error" ? 9000 : 4000);
  }, []);
  return (
    <NotifyContext.Provider value={notify}>
      {children}
      <div class="notices" role="status" aria-live="polite">
        {notices.map((n) => (
          <div key={n.id} class={`notice notice-${n.kind}`} data-kind={n.kind}>
            {n.text}
          </div>
        ))}
      </div>
    </NotifyContext.Provider>
  );
}

/** An error message in place, for a page or a form that could not do its work. */
export function ErrorBox({ error }: { error: string | null }) {
  return error ? (
    <div class="error-box" role="alert">
      {error}
    </div>
  ) : null;
}
