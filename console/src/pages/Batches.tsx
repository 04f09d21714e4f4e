import { useEffect, useState } from "preact/hooks";
import { call, messageOf, send } from "../api.js";
import { ErrorBox, useNotify } from "../feedback.js";
import { integer, when } from "../format.js";
import type { Session } from "../session.js";
import type { WireBatch } from "../wire.js";

const ACTIVE = ["validating", "in_progress", "finalizing", "cancelling"];

/** The account's batches (newest first): status, counts, and the output and error files to download. */
export function BatchesPage({ session }: { session: Session }) {
  const [batches, setBatches] = useState<WireBatch[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const notify = useNotify();

  const load = async () => {
    try {
      setBatches((await call<{ data: WireBatch[] }>(session.key, "/v1/batches?limit=100")).data);
      setError(null);
    } catch (failure) {
      setError(messageOf(failure));
    }
  };

  useEffect(() => {
    void load();
    const timer = setInterval(() => void load(), 5_000);
    return () => clearInterval(timer);
  }, [session.key]);

  const download = async (fileId: string, name: string) => {
    try {
      const blob = await (await send(session.key, `/v1/files/${encodeURIComponent(fileId)}/content`)).blob();
      const link = document.createElement("a");
      link.href = URL.createObjectURL(blob);
      link.download = name;
      link.click();
      URL.revokeObjectURL(link.href);
    } catch (failure) {
      notify("error", messageOf(failure));
    }
  };

  const cancel = async (batch: WireBatch) => {
    try {
      await call(session.key, `/v1/batches/${encodeURIComponent(batch.id)}/cancel`, { method: "POST" });
      notify("ok", `Cancelling ${batch.id}.`);
      await load();
    } catch (failure) {
      notify("error", messageOf(failure));
    }
  };

  return (
    <section class="page">
      <div class="page-head">
        <h1>Batches</h1>
        <button type="button" onClick={() => void load()}>
          Refresh
        </button>
      </div>
      <p class="muted">
        Jobs of the Batch API (upload a JSONL file to /v1/files, then POST /v1/batches). They run on spare capacity at the batch price.
      </p>
      <ErrorBox error={error} />
      {batches === null && !error ? <p class="muted">Loading…</p> : null}
      {batches?.length === 0 ? <p class="muted">No batches yet.</p> : null}
      {batches?.length ? (
        <div class="card table-wrap">
          <table class="data" data-testid="batches-table">
            <thead>
              <tr>
                <th>Batch</th>
                <th>Status</th>
                <th>Endpoint</th>
                <th>Done</th>
                <th>Failed</th>
                <th>Created</th>
                <th>Files</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {batches.map((b) => (
                <tr key={b.id} data-batch={b.id}>
                  <td class="mono">{b.id}</td>
                  <td>
                    <span class={`status status-${b.status}`}>{b.status}</span>
                    {b.errors?.data[0] ? <div class="muted small">{b.errors.data[0].message}</div> : null}
                  </td>
                  <td class="mono">{b.endpoint}</td>
                  <td>
                    {integer(b.request_counts.completed)} / {integer(b.request_counts.total)}
                  </td>
                  <td>{integer(b.request_counts.failed)}</td>
                  <td>{when(b.created_at)}</td>
                  <td>
                    {b.output_file_id ? (
                      <button type="button" class="small" onClick={() => void download(b.output_file_id!, `${b.id}_output.jsonl`)}>
                        Output
                      </button>
                    ) : null}{" "}
                    {b.error_file_id ? (
                      <button type="button" class="small" onClick={() => void download(b.error_file_id!, `${b.id}_errors.jsonl`)}>
                        Errors
                      </button>
                    ) : null}
                  </td>
                  <td>
                    {ACTIVE.includes(b.status) && b.status !== "cancelling" && b.status !== "finalizing" ? (
                      <button type="button" class="danger small" onClick={() => void cancel(b)}>
                        Cancel
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}
