/**
 * The OpenAI-compatible routes are served under each of these: the specification's `compat`, the
 * hosted service's own `openai` segment, and the bare `/v1` many tools assume.
 */
export const API_PREFIXES = ["/v1/compat", "/v1/openai", "/v1"] as const;
