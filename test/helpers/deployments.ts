import { waitFor, type RunningServer } from "./server.js";

/** A JSON reply: its status and parsed body. */
export interface Reply {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One call to the API with an account key. */
export async function api(server: RunningServer, key: string, method: string, path: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

/** Polls GET /v1/deployments/{id} until `done` holds (two minutes at most). */
export function waitForDeployment(server: RunningServer, key: string, id: string, done: (d: any) => boolean): Promise<any> {
  return waitFor(async () => {
    const { body } = await api(server, key, "GET", `/v1/deployments/${id}`);
    return done(body) ? body : undefined;
  }, 120_000);
}
