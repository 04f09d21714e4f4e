/**
 * The OpenAI-compatible routes are served under each of these: the specification's `compat`, the
 * hosted service's own `openai` segment, and the bare `/v1` many tools assume.
 */
export const COMPAT_PREFIX = "/v1/compat";
export const API_PREFIXES = [COMPAT_PREFIX, "/v1/openai", "/v1"] as const;
