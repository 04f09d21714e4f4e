import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

export const API_KEY_PREFIX = "sk-sy-";
/** How many characters of the key are kept in clear, so listings can tell keys apart. */
const SHOWN_PREFIX_LENGTH = API_KEY_PREFIX.length + 6;
/** 32 random bytes in base64url (43 characters); anything much longer is not one of our keys. */
const MAX_KEY_LENGTH = 128;

export interface GeneratedApiKey {
  /** The plaintext key: shown to the operator once, never stored, never logged. */
  key: string;
  prefix: string;
  secretHash: string;
}

/** A new key with 256 bits of randomness, e.g. `sk-sy-3q2…`. */
export function generateApiKey(): GeneratedApiKey {
  const key = API_KEY_PREFIX + randomBytes(32).toString("base64url");
  return { key, prefix: key.slice(0, SHOWN_PREFIX_LENGTH), secretHash: hashApiKey(key) };
}

/**
 * SHA-256 hex of the whole key. A fast, unsalted hash is the right tool here: the keys carry 256
 * random bits, so there is no dictionary to try and nothing for a slow password hash (bcrypt,
 * scrypt) to protect, while a fast hash lets every request look its key up by an index.
 */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** Cheap shape check before touching the database, so junk bearer tokens cost no query. */
export function looksLikeApiKey(token: string): boolean {
  return token.startsWith(API_KEY_PREFIX) && token.length <= MAX_KEY_LENGTH;
}

/** Constant-time comparison of two hex SHA-256 digests. */
export function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, "hex");
  const right = Buffer.from(b, "hex");
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}
