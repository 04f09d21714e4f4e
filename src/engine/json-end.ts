/**
 * Tells when a JSON text being generated is complete, so generation ends there without waiting for
 * the model to choose its end-of-generation token. An object or array is complete when it closes, a
 * string when its closing quote comes, `true`/`false`/`null` when spelled out. A number at the top
 * level is never known to be complete from its text (`1` may go on as `12`): the grammar ends it,
 * leaving the model no token but the end of generation once the number can go no further or the
 * model stops it.
 */
export class JsonEnd {
  private depth = 0;
  private root: "container" | "string" | "word" | "number" | undefined;
  private word = "";
  private inString = false;
  private escaped = false;
  private done = false;

  get complete(): boolean {
    return this.done;
  }

  push(text: string): boolean {
    for (const ch of text) {
      if (this.done) break;
      if (this.root === undefined) this.begin(ch);
      else this.next(ch);
    }
    return this.done;
  }

  private begin(ch: string): void {
    if (ch === "{" || ch === "[") {
      this.root = "container";
      this.depth = 1;
    } else if (ch === '"') {
      this.root = "string";
      this.inString = true;
    } else if (/[tfn]/.test(ch)) {
      this.root = "word";
      this.word = ch;
    } else if (/[-0-9]/.test(ch)) this.root = "number";
  }

  private next(ch: string): void {
    if (this.inString) {
      if (this.escaped) this.escaped = false;
      else if (ch === "\\") this.escaped = true;
      else if (ch === '"') {
        this.inString = false;
        if (this.root === "string") this.done = true;
      }
      return;
    }
    if (this.root === "word") {
      this.word += ch;
      this.done = ["true", "false", "null"].includes(this.word);
    } else if (this.root === "container") {
      if (ch === '"') this.inString = true;
      else if (ch === "{" || ch === "[") this.depth++;
      else if (ch === "}" || ch === "]") this.done = --this.depth === 0;
    }
  }
}
