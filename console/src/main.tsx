import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { FeedbackProvider } from "./feedback.js";
import { EnginesPage } from "./pages/Engines.js";
import { KeysPage } from "./pages/Keys.js";
import { ModelsPage } from "./pages/Models.js";
import { PlaygroundPage } from "./pages/Playground.js";
import { SignInPage } from "./pages/SignIn.js";
import { UsagePage } from "./pages/Usage.js";
import { clearSession, loadSession, type Session } from "./session.js";
import { initialTheme, toggleTheme } from "./theme.js";

/** Hash routes: the path never reaches the server, so nothing about the session is ever in a URL it sees. */
const USER_PAGES = [
  ["models", "Models"],
  ["playground", "Playground"],
  ["usage", "Usage"],
  ["keys", "Keys"],
] as const;
const ADMIN_PAGES = [["engines", "Engines"]] as const;

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

  if (!session) return <SignInPage onSignedIn={(s) => { setSession(s); location.hash = s.role === "admin" ? "#/engines" : "#/models"; }} />;

  const pages = session.role === "admin" ? ADMIN_PAGES : USER_PAGES;
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
        <span class="who">{session.role === "admin" ? "admin key" : "API key"}</span>
        <button class="ghost" onClick={() => setTheme(toggleTheme())} title="Switch between light and dark">
          {theme === "dark" ? "Light" : "Dark"}
        </button>
        <button class="ghost" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main class="content">
        <Page page={page} session={session} />
      </main>
    </div>
  );
}

function Page({ page, session }: { page: string; session: Session }) {
  if (page === "engines") {
    return session.role === "admin" ? <EnginesPage /> : <Forbidden what="The Engines view" />;
  }
  if (session.role === "admin") return <Forbidden what="This page" admin />;
  switch (page) {
    case "models":
      return <ModelsPage session={session} />;
    case "playground":
      return <PlaygroundPage session={session} />;
    case "usage":
      return <UsagePage session={session} />;
    case "keys":
      return <KeysPage session={session} />;
    default:
      return <p class="muted">No page here. Pick one above.</p>;
  }
}

function Forbidden({ what, admin = false }: { what: string; admin?: boolean }) {
  return (
    <section class="page">
      <h1>Not available</h1>
      <div class="error-box" role="alert" data-testid="forbidden">
        {admin
          ? `${what} needs an API key of an account; the admin key manages the service, it does not call models.`
          : `${what} needs the admin key (SWITCHYARD_ADMIN_KEY). Sign in with it to see the engines.`}
      </div>
    </section>
  );
}

render(
  <FeedbackProvider>
    <App />
  </FeedbackProvider>,
  document.getElementById("app")!,
);
