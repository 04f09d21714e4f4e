import { useEffect, useState } from "preact/hooks";
import { call, messageOf } from "../api.js";
import { ErrorBox, useNotify } from "../feedback.js";
import { when } from "../format.js";
import type { Session } from "../session.js";
import type { WireCreatedKey, WireKey, WireModel } from "../wire.js";

/** The signed-in account's keys, through the account-scoped key API (needs the manage-keys right). */
export function KeysPage({ session }: { session: Session }) {
  const [keys, setKeys] = useState<WireKey[] | null>(null);
  const [models, setModels] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [created, setCreated] = useState<WireCreatedKey | null>(null);
  const notify = useNotify();

  const load = async () => {
    try {
      setKeys((await call<{ data: WireKey[] }>(session.key, "/v1/keys")).data);
      setError(null);
    } catch (failure) {
      setError(messageOf(failure));
    }
  };
  useEffect(() => {
    void load();
    call<{ data: WireModel[] }>(session.key, "/v1/compat/models")
      .then((list) => setModels(list.data.map((m) => m.id)))
      .catch(() => {});
  }, [session.key]);

  const revoke = async (key: WireKey) => {
    if (!confirm(`Revoke ${key.name ?? `${key.prefix}…`}? Requests with it will fail at once.`)) return;
    try {
      await call(session.key, `/v1/keys/${encodeURIComponent(key.id)}`, { method: "DELETE" });
      notify("ok", `Revoked ${key.name ?? key.id}.`);
      await load();
    } catch (failure) {
      notify("error", messageOf(failure));
    }
  };

  return (
    <section class="page">
      <div class="page-head">
        <h1>API keys</h1>
      </div>
      <ErrorBox error={error} />
      {created ? <CreatedKey created={created} onDone={() => setCreated(null)} /> : null}
      {keys ? (
        <>
          <CreateKeyForm
            session={session}
            models={models}
            onCreated={(k) => {
              setCreated(k);
              void load();
            }}
          />
          <KeysTable keys={keys} onRevoke={(k) => void revoke(k)} />
        </>
      ) : null}
    </section>
  );
}

function KeysTable({ keys, onRevoke }: { keys: WireKey[]; onRevoke: (key: WireKey) => void }) {
  return (
    <div class="card table-wrap">
      <table class="data" data-testid="keys-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Key</th>
            <th>Created</th>
            <th>Last used</th>
            <th>Expires</th>
            <th>Models</th>
            <th>Limits</th>
            <th>Rights</th>
            <th>Status</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {keys.map((k) => {
            const status = k.revoked_at ? "revoked" : k.expires_at && k.expires_at * 1000 < Date.now() ? "expired" : "active";
            return (
              <tr key={k.id} data-key-id={k.id} data-status={status}>
                <td>{k.name ?? <span class="muted">unnamed</span>}</td>
                <td class="mono">{k.prefix}…</td>
                <td>{when(k.created_at)}</td>
                <td>{when(k.last_used_at)}</td>
                <td>{k.expires_at ? when(k.expires_at) : "never"}</td>
                <td>{k.allowed_models ? k.allowed_models.join(", ") : "all"}</td>
                <td class="small">
                  {k.rpm_limit ?? "default"} RPM · {k.tpm_limit ?? "default"} TPM
                  <br />
                  {k.budget_usd === null ? `$${k.spent_usd} spent, no budget` : `$${k.spent_usd} of $${k.budget_usd}`}
                </td>
                <td>{[k.manage_keys && "manage keys", k.manage_deployments && "manage deployments"].filter(Boolean).join(", ") || "–"}</td>
                <td>
                  <span class={`status status-${status}`}>{status}</span>
                </td>
                <td>
                  {status === "active" ? (
                    <button type="button" class="danger small" onClick={() => onRevoke(k)}>
                      Revoke
                    </button>
                  ) : null}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function CreatedKey({ created, onDone }: { created: WireCreatedKey; onDone: () => void }) {
  const notify = useNotify();
  return (
    <div class="card created-key" role="alert">
      <h2>New key {created.name ? `“${created.name}”` : ""}</h2>
      <p>Store it now: it is shown only this once.</p>
      <pre class="code mono" data-testid="created-key">
        {created.key}
      </pre>
      <div class="actions">
        <button
          type="button"
          onClick={() =>
            navigator.clipboard.writeText(created.key).then(
              () => notify("ok", "Copied."),
              (e: Error) => notify("error", e.message),
            )
          }
        >
          Copy
        </button>
        <button type="button" class="primary" onClick={onDone}>
          I have stored it
        </button>
      </div>
    </div>
  );
}

function CreateKeyForm({ session, models, onCreated }: { session: Session; models: string[]; onCreated: (key: WireCreatedKey) => void }) {
  const empty = { name: "", days: "", models: [] as string[], rpm: "", tpm: "", budget: "", manage: false, deploy: false };
  const [form, setForm] = useState(empty);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const notify = useNotify();
  const field = (name: "name" | "days" | "rpm" | "tpm" | "budget") => (e: Event) =>
    setForm({ ...form, [name]: (e.target as HTMLInputElement).value });

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, unknown> = { name: form.name || undefined, manage_keys: form.manage, manage_deployments: form.deploy };
      // Numbers go as typed; the API checks them and its message is what the user sees.
      if (form.days) body.expires_at = Math.floor(Date.now() / 1000 + Number(form.days) * 86_400);
      if (form.models.length) body.allowed_models = form.models;
      if (form.rpm) body.rpm_limit = Number(form.rpm);
      if (form.tpm) body.tpm_limit = Number(form.tpm);
      if (form.budget) body.budget_usd = form.budget;
      const created = await call<WireCreatedKey>(session.key, "/v1/keys", { body });
      notify("ok", `Created ${created.name ?? created.id}.`);
      setForm(empty);
      onCreated(created);
    } catch (failure) {
      setError(messageOf(failure));
      notify("error", messageOf(failure));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card create-key" onSubmit={submit}>
      <h2>Create a key</h2>
      <p class="muted small">A new key gets at most your key's rights; a field left blank takes yours.</p>
      <div class="form-grid">
        <label>
          Name
          <input name="key-name" value={form.name} onInput={field("name")} placeholder="e.g. laptop" />
        </label>
        <label>
          Expires in days
          <input name="expires-days" type="number" min="1" value={form.days} onInput={field("days")} placeholder="as yours" />
        </label>
        <label>
          Requests / min
          <input name="rpm" type="number" min="1" value={form.rpm} onInput={field("rpm")} placeholder="as yours" />
        </label>
        <label>
          Tokens / min
          <input name="tpm" type="number" min="1" value={form.tpm} onInput={field("tpm")} placeholder="as yours" />
        </label>
        <label>
          Budget (USD)
          <input name="budget" value={form.budget} onInput={field("budget")} placeholder="what yours has left" inputMode="decimal" />
        </label>
      </div>
      <fieldset class="models-pick">
        <legend>
          Models <span class="muted small">(none ticked: every model this key may use)</span>
        </legend>
        {models.map((m) => (
          <label key={m} class="check">
            <input
              type="checkbox"
              checked={form.models.includes(m)}
              onChange={(e) =>
                setForm({
                  ...form,
                  models: (e.target as HTMLInputElement).checked ? [...form.models, m] : form.models.filter((x) => x !== m),
                })
              }
            />
            {m}
          </label>
        ))}
      </fieldset>
      <label class="check">
        <input
          type="checkbox"
          name="manage-keys"
          checked={form.manage}
          onChange={(e) => setForm({ ...form, manage: (e.target as HTMLInputElement).checked })}
        />
        Manage keys: the new key may list, create and revoke this account's keys
      </label>
      <label class="check">
        <input
          type="checkbox"
          name="manage-deployments"
          checked={form.deploy}
          onChange={(e) => setForm({ ...form, deploy: (e.target as HTMLInputElement).checked })}
        />
        Manage deployments: the new key may create, scale and delete this account's dedicated deployments
      </label>
      <ErrorBox error={error} />
      <button type="submit" class="primary" disabled={busy}>
        {busy ? "Creating…" : "Create key"}
      </button>
    </form>
  );
}
