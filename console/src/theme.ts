/** Dark or light: the system's choice until the user picks one (kept in localStorage: it is no secret). */
export type Theme = "light" | "dark";
const STORE_KEY = "switchyard.console.theme";

export function initialTheme(): Theme {
  const stored = localStorage.getItem(STORE_KEY);
  const theme: Theme =
    stored === "light" || stored === "dark" ? stored : matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = theme;
  return theme;
}

export function toggleTheme(): Theme {
  const next: Theme = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  document.documentElement.dataset.theme = next;
  localStorage.setItem(STORE_KEY, next);
  return next;
}
