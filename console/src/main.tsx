import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { FeedbackProvider } from "./feedback.js";
import { EnginesPage } from "./pages/Engines.js";
import { KeysPage } from "./pages/Keys.js";
import { ModelsPage } from "./pages/Models.js";
import { PlaygroundPage } from "./pages/Playground.js";
import { SignInPage } from "./pages/SignIn.js";
import { UsagePage } from "./pages/Usage.js";
import { BatchesPage } from "./pages/Batches.js";
import { clearSession, loadSession, type Session } from "./session.js";
import { initialTheme, toggleTheme } from "./theme.js";

/** Hash routes: the path never reaches the server, so nothing about the session is ever in a URL it sees. */
const ACCOUNT_PAGES = [
  ["models", "Models"],
  ["playground", "Playground"],
  ["batches", "Batches"],
  ["usage", "Usage"],
  ["keys", "Keys"],
] as const;
/** Pages that need no key at all (they read /health and /metrics): shown signed in or not. */
const OPEN_PAGES = [["engines", "Engines"]] as const;

function currentRoute(): string {
  return location.hash.replace(/^#\/?/, "") || "";
}

function App() {
  const [session, setSession] = useState<Session | null>(loadSession);
  const [route, setRoute] = useState(currentRoute);
  const [theme, setTheme] = useState(initialTheme);

  useEffect(() => {
    const onHash = () => setRoute(currentRoute());
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);

  const open = OPEN_PAGES.some(([id]) => id === route);
  if (!session && !open)
    return (
      <SignInPage
        onSignedIn={(s) => {
          setSession(s);
          location.hash = "#/models";
        }}
      />
    );

  const pages = session ? [...ACCOUNT_PAGES, ...OPEN_PAGES] : OPEN_PAGES;
  const page = route || pages[0][0];
  const signOut = () => {
    clearSession();
    setSession(null);
    location.hash = "";
  };

  return (
    <div class="shell">
      <header class="topbar">
        <span class="brand">Switchyard</span>
        <nav class="nav">
          {pages.map(([id, label]) => (
            <a key={id} href={`#/${id}`} class={page === id ? "active" : ""} aria-current={page === id ? "page" : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span class="who">{session ? "API key" : "no key"}</span>
        <button type="button" class="ghost" onClick={() => setTheme(toggleTheme())} title="Switch between light and dark">
          {theme === "dark" ? "Light" : "Dark"}
        </button>
        {session ? (
          <button type="button" class="ghost" onClick={signOut}>
            Sign out
          </button>
        ) : (
          <button type="button" class="ghost" onClick={() => (location.hash = "")}>
            Sign in
          </button>
        )}
      </header>
      <main class="content">{session ? <Page page={page} session={session} /> : <EnginesPage />}</main>
    </div>
  );
}

function Page({ page, session }: { page: string; session: Session }) {
  switch (page) {
    case "engines":
      return <EnginesPage />;
    case "models":
      return <ModelsPage session={session} />;
    case "playground":
      return <PlaygroundPage session={session} />;
    case "batches":
      return <BatchesPage session={session} />;
    case "usage":
      return <UsagePage session={session} />;
    case "keys":
      return <KeysPage session={session} />;
    default:
      return <p class="muted">No page here. Pick one above.</p>;
  }
}

render(
  <FeedbackProvider>
    <App />
  </FeedbackProvider>,
  document.getElementById("app")!,
);
