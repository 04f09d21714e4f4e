/**
 * Every call the console makes: an ordinary API request with the signed-in key in the
 * Authorization header. Errors carry the API's own message, as the API wrote it.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null = null,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

export interface CallOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
}

export async function call<T>(key: string, path: string, options: CallOptions = {}): Promise<T> {
  const response = await send(key, path, options);
  return parseExact((await response.text()) || "null") as T;
}

/** The raw response, for streams; a non-2xx answer is thrown as an ApiError. */
export async function send(key: string, path: string, options: CallOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (options.body !== undefined) headers["content-type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(path, {
      method: options.method ?? (options.body === undefined ? "GET" : "POST"),
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
      // The key is in a header; nothing else about this tab needs to travel.
      credentials: "omit",
      cache: "no-store",
    });
  } catch (error) {
    if ((error as Error).name === "AbortError") throw error;
    throw new ApiError(0, `The server did not answer (${(error as Error).message}).`);
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function errorOf(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  try {
    const error = (JSON.parse(text) as { error?: { message?: string; code?: string; param?: string } }).error;
    if (error?.message) return new ApiError(response.status, error.message, error.code ?? null, error.param ?? null);
  } catch {
    // not JSON: fall through to the status line
  }
  return new ApiError(response.status, `HTTP ${response.status} ${response.statusText}`.trim());
}

/**
 * JSON.parse that keeps every fractional number as its exact source text: prices and costs are
 * exact decimals on the wire, and a float would change the last digits. Integers stay numbers.
 */
export function parseExact(text: string): unknown {
  return JSON.parse(text, function (this: unknown, _key: string, value: unknown, context?: { source?: string }) {
    if (typeof value === "number" && !Number.isInteger(value)) return context?.source ?? String(value);
    return value;
  } as (this: unknown, key: string, value: unknown) => unknown);
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
