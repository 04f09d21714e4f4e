/**
 * `switchyard serve --help` lists every setting from the settings table (src/config/settings-reference.ts),
 * the one docs/operations/settings.md is generated from: a setting added there is in the help too.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { serveCommand } from "../../src/cli/serve-command.js";
import { plainText, settingsHelp } from "../../src/config/settings-help.js";
import { SETTINGS_REFERENCE } from "../../src/config/settings-reference.js";

/** The help `serve --help` prints, without printing it or exiting. */
function serveHelp(): string {
  let text = "";
  const command = serveCommand().configureOutput({ writeOut: (chunk) => (text += chunk), writeErr: () => {} });
  command.outputHelp();
  return text;
}

test("serve --help lists each setting: its variables and flags, its default and what it does, on one line each", () => {
  const help = serveHelp();
  assert.ok(help.includes(settingsHelp()), "the settings section follows the options");
  const lines = help.split("\n");
  for (const row of SETTINGS_REFERENCE) {
    const names = row.variables.join(", ");
    const at = lines.findIndex((line) => line.startsWith(`  ${names}  `) || line.startsWith(`  ${names} (`));
    assert.ok(at >= 0, `${row.variables[0]} listed`);
    for (const flag of row.flags ?? []) assert.ok(lines[at]!.includes(flag), `${flag} beside ${row.variables[0]}`);
    assert.ok(lines[at]!.endsWith(`[default: ${plainText(row.defaultValue)}]`), lines[at]);
    assert.equal(lines[at + 1]!.trim(), plainText(row.meaning));
  }
});

test("the Markdown is made plain: code spans and emphasis lose their marks, nothing else changes", () => {
  assert.equal(plainText("`info`, or `off` (see *Keys*); 2 * 3 * 4"), "info, or off (see Keys); 2 * 3 * 4");
  assert.ok(!settingsHelp().includes("`"));
});
