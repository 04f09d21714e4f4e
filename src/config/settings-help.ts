/**
 * The settings as `switchyard serve --help` lists them, from the table the settings page is
 * generated from (settings-reference.ts): each row's variables and flags, its default, and what it
 * does on one line, the Markdown made plain.
 */
import { SETTINGS_REFERENCE, type SettingReference } from "./settings-reference.js";

/** Markdown's code spans and emphasis as plain text. */
export function plainText(markdown: string): string {
  return markdown.replace(/`([^`]*)`/g, "$1").replace(/\*([^*\s][^*]*)\*/g, "$1");
}

/** One setting: its names and default on a line, what it does on the next. */
function settingLines(row: SettingReference): string {
  const names = row.variables.join(", ") + (row.flags?.length ? ` (${row.flags.join(", ")})` : "");
  return `  ${names}  [default: ${plainText(row.defaultValue)}]\n      ${plainText(row.meaning)}`;
}

/** The help text's settings section. */
export function settingsHelp(rows: readonly SettingReference[] = SETTINGS_REFERENCE): string {
  return [
    "Settings, as environment variables (in parentheses, the flags that set the same where a command takes them):",
    ...rows.map(settingLines),
    "",
    "The same table: docs/operations/settings.md.",
  ].join("\n");
}
