import { useEffect, useRef, useState } from "preact/hooks";
import { call, messageOf } from "../api.js";
import { ErrorBox, useNotify } from "../feedback.js";
import { CodeDialog } from "../playground/CodeDialog.js";
import { SettingsPanel } from "../playground/SettingsPanel.js";
import { buildRequest, DEFAULT_SETTINGS, defaultModel, type Settings, type Turn } from "../playground/request.js";
import { MessageItem, type Message } from "../playground/MessageItem.js";
import { streamChat } from "../playground/stream.js";
import type { Session } from "../session.js";
import type { WireModel } from "../wire.js";

/** Streamed chat with any model; every send resends the whole history, as the API requires. */
export function PlaygroundPage({ session }: { session: Session }) {
  const [models, setModels] = useState<WireModel[]>([]);
  const [settings, setSettings] = useState<Settings>(DEFAULT_SETTINGS);
  const [messages, setMessages] = useState<Message[]>([]);
  const [draft, setDraft] = useState("");
  const [editing, setEditing] = useState<{ index: number; text: string } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [showCode, setShowCode] = useState(false);
  const abort = useRef<AbortController | null>(null);
  const notify = useNotify();
  const busy = messages.some((m) => m.streaming);

  useEffect(() => {
    call<{ data: WireModel[] }>(session.key, "/v1/compat/models")
      .then((list) => {
        setModels(list.data);
        setSettings((s) => (s.model ? s : { ...s, model: defaultModel(list.data) }));
      })
      .catch((failure) => setError(messageOf(failure)));
    return () => abort.current?.abort();
  }, [session.key]);

  /** Sends `history` (ending with a user turn) and streams the answer in after it; earlier answers keep their stats. */
  const run = async (history: Message[]) => {
    let body: Record<string, unknown>;
    try {
      body = buildRequest(settings, history.map(turnOf), true);
    } catch (failure) {
      return setError(messageOf(failure));
    }
    setError(null);
    const controller = new AbortController();
    abort.current = controller;
    setMessages([...history, { role: "assistant", content: "", streaming: true }]);
    const append = (text: string) =>
      setMessages((list) => list.map((m, i) => (i === list.length - 1 ? { ...m, content: m.content + text } : m)));
    try {
      const stats = await streamChat(session.key, body, append, controller.signal);
      setMessages((list) => list.map((m, i) => (i === list.length - 1 ? { ...m, streaming: false, stats } : m)));
      notify("ok", `Answer complete: ${stats.usage?.completion_tokens ?? "?"} tokens, $${String(stats.usage?.estimated_cost ?? "?")}.`);
    } catch (failure) {
      const stopped = (failure as Error).name === "AbortError";
      setMessages((list) => {
        const last = list[list.length - 1];
        // A failed answer with no text is dropped; one that was stopped part-way keeps its text.
        return last?.content ? list.map((m, i) => (i === list.length - 1 ? { ...m, streaming: false } : m)) : list.slice(0, -1);
      });
      if (stopped) notify("info", "Stopped.");
      else {
        setError(messageOf(failure));
        notify("error", messageOf(failure));
      }
    } finally {
      abort.current = null;
    }
  };

  const send = (event: Event) => {
    event.preventDefault();
    if (!draft.trim() || busy) return;
    const history = [...messages, { role: "user" as const, content: draft }];
    setDraft("");
    void run(history);
  };

  const regenerate = (index: number) => void run(messages.slice(0, index));
  const saveEdit = () => {
    if (!editing) return;
    const history = [...messages.slice(0, editing.index), { role: "user" as const, content: editing.text }];
    setEditing(null);
    void run(history);
  };

  let codeBody: Record<string, unknown> | null = null;
  try {
    codeBody = buildRequest(settings, [...messages.map(turnOf), ...(draft ? [{ role: "user" as const, content: draft }] : [])], true);
  } catch {
    codeBody = null;
  }

  return (
    <section class="page playground">
      <div class="page-head">
        <h1>Playground</h1>
        <div class="actions">
          <button type="button" onClick={() => setShowCode(true)} disabled={!codeBody}>
            View code
          </button>
          <button
            type="button"
            onClick={() => {
              setMessages([]);
              notify("info", "Conversation cleared.");
            }}
            disabled={busy || messages.length === 0}
          >
            Clear
          </button>
        </div>
      </div>
      <div class="play-layout">
        <SettingsPanel settings={settings} models={models} onChange={setSettings} />
        <div class="chat">
          <ErrorBox error={error} />
          <ol class="messages">
            {messages.length === 0 ? <li class="muted empty">Send a message to start. Each turn resends the whole conversation.</li> : null}
            {messages.map((message, index) => (
              <MessageItem
                key={index}
                message={message}
                busy={busy}
                editing={editing?.index === index ? editing.text : null}
                onEdit={(text) => setEditing(text === null ? null : { index, text })}
                onSaveEdit={saveEdit}
                onRegenerate={() => regenerate(index)}
              />
            ))}
          </ol>
          <form class="composer" onSubmit={send}>
            <textarea
              value={draft}
              rows={3}
              placeholder="Message (Ctrl+Enter to send)"
              aria-label="Message"
              onInput={(e) => setDraft((e.target as HTMLTextAreaElement).value)}
              onKeyDown={(e) => {
                if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) send(e);
              }}
            />
            {busy ? (
              <button type="button" onClick={() => abort.current?.abort()}>
                Stop
              </button>
            ) : (
              <button type="submit" class="primary" disabled={!draft.trim() || !settings.model}>
                Send
              </button>
            )}
          </form>
        </div>
      </div>
      {showCode && codeBody ? <CodeDialog body={codeBody} onClose={() => setShowCode(false)} /> : null}
    </section>
  );
}

/** What the API is sent of a message: its role and text, nothing the console measured. */
function turnOf({ role, content }: Message): Turn {
  return { role, content };
}
