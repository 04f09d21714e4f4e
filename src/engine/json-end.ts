/**
 * Tells when a JSON text being generated is complete. Under a JSON grammar the model may only add
 * whitespace or end once the value is closed, and small models often pad with whitespace up to
 * max_tokens, so generation ends as soon as the top-level object or array closes. (A scalar at the
 * top level is left to the end-of-generation token.)
 */
export class JsonEnd {
  private depth = 0;
  private started = false;
  private inString = false;
  private escaped = false;
  private done = false;

  get complete(): boolean {
    return this.done;
  }

  push(text: string): boolean {
    for (const ch of text) {
      if (this.done) break;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === "\\") this.escaped = true;
        else if (ch === '"') this.inString = false;
        continue;
      }
      if (ch === '"') this.inString = true;
      else if (ch === "{" || ch === "[") {
        this.depth++;
        this.started = true;
      } else if (ch === "}" || ch === "]") {
        this.depth--;
        if (this.started && this.depth === 0) this.done = true;
      }
    }
    return this.done;
  }
}
