import { randomBytes } from "node:crypto";

/** Opaque, unguessable-enough row ids such as `acct_…` and `key_…` (96 random bits). */
export function newId(kind: "acct" | "key"): string {
  return `${kind}_${randomBytes(12).toString("base64url")}`;
}
