import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { ROOT } from "./server.js";

/** Debian's Chromium (scripts/test-setup.sh installs it); Playwright's own browser download is never used. */
export const CHROMIUM = process.env.SWITCHYARD_TEST_CHROMIUM ?? "/usr/bin/chromium";
export const ARTIFACTS = join(ROOT, "test-artifacts", "console");

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`No Chromium at ${CHROMIUM}: run scripts/test-setup.sh (it installs Debian's chromium).`);
  // --no-sandbox: the test machines run as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
}

/**
 * Console messages that mean the page broke: uncaught errors and Content-Security-Policy
 * refusals. Tests assert this stays empty.
 */
export function watchForProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    const text = message.text();
    if (/Content Security Policy|Refused to/i.test(text)) problems.push(`CSP: ${text}`);
  });
  return problems;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}
