import type { Database } from "./database.js";

export interface Migration {
  /** Strictly increasing; never renumber or edit a migration that has shipped, add a new one. */
  id: number;
  name: string;
  /** May hold several statements; runs in one transaction together with its bookkeeping row. */
  sql: string;
}

/** Append new migrations at the end, with the next id. */
export const migrations: Migration[] = [
  {
    id: 1,
    name: "accounts and api keys",
    sql: `
      CREATE TABLE accounts (
        id          text PRIMARY KEY,
        name        text NOT NULL UNIQUE,
        disabled    boolean NOT NULL DEFAULT false,
        created_at  timestamptz NOT NULL DEFAULT now()
      );

      CREATE TABLE api_keys (
        id              text PRIMARY KEY,
        account_id      text NOT NULL REFERENCES accounts (id),
        name            text,
        prefix          text NOT NULL,
        secret_hash     text NOT NULL UNIQUE,
        created_at      timestamptz NOT NULL DEFAULT now(),
        expires_at      timestamptz,
        revoked_at      timestamptz,
        allowed_models  text[],
        last_used_at    timestamptz
      );

      CREATE INDEX api_keys_account_id_idx ON api_keys (account_id);
    `,
  },
  {
    id: 2,
    name: "usage ledger",
    sql: `
      CREATE TABLE usage_records (
        request_id         text PRIMARY KEY,
        account_id         text NOT NULL REFERENCES accounts (id),
        key_id             text NOT NULL REFERENCES api_keys (id),
        model              text NOT NULL,
        service_tier       text NOT NULL,
        prompt_tokens      integer NOT NULL,
        cached_tokens      integer NOT NULL,
        completion_tokens  integer NOT NULL,
        cost_usd           numeric NOT NULL,
        status             text NOT NULL,
        finish_reason      text,
        error_code         text,
        queue_ms           integer,
        ttft_ms            integer,
        duration_ms        integer NOT NULL,
        created_at         timestamptz NOT NULL DEFAULT now()
      );

      CREATE INDEX usage_records_account_created_idx ON usage_records (account_id, created_at);
    `,
  },
  {
    id: 3,
    name: "key limits and spend budgets",
    sql: `
      ALTER TABLE api_keys
        ADD COLUMN budget_usd  numeric,
        ADD COLUMN spent_usd   numeric NOT NULL DEFAULT 0,
        ADD COLUMN rpm_limit   integer,
        ADD COLUMN tpm_limit   integer;

      CREATE TABLE budget_reservations (
        request_id  text PRIMARY KEY,
        key_id      text NOT NULL REFERENCES api_keys (id),
        amount_usd  numeric NOT NULL,
        expires_at  timestamptz NOT NULL
      );

      CREATE INDEX budget_reservations_key_id_idx ON budget_reservations (key_id);
    `,
  },
  {
    id: 4,
    name: "in-flight ledger rows and their owning processes",
    sql: `
      -- A request's row is written when it is admitted (status 'in_flight'), owned by the server
      -- process running it, with the prices it is billed at, and its completion_tokens kept at or
      -- above what was delivered; a dead owner's rows are billed and closed as 'interrupted'.
      ALTER TABLE usage_records
        ADD COLUMN owner_id  text,
        ADD COLUMN prices    text;

      CREATE INDEX usage_records_in_flight_idx ON usage_records (owner_id) WHERE status = 'in_flight';

      CREATE TABLE server_owners (
        id          text PRIMARY KEY,
        lock_key    bigint NOT NULL,
        pid         integer NOT NULL,
        host        text NOT NULL,
        started_at  timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    id: 5,
    name: "the API each request came through",
    sql: `ALTER TABLE usage_records ADD COLUMN api text NOT NULL DEFAULT 'chat.completions';`,
  },
  {
    id: 6,
    name: "stored responses",
    sql: `
      CREATE TABLE responses (
        id            text PRIMARY KEY,
        account_id    text NOT NULL REFERENCES accounts (id),
        conversation  jsonb NOT NULL,
        body          text NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now()
      );

      CREATE INDEX responses_account_id_idx ON responses (account_id);
    `,
  },
  {
    id: 7,
    name: "manage-keys right",
    // Existing keys keep exactly what they could do: no key gains the right by the upgrade.
    sql: `ALTER TABLE api_keys ADD COLUMN manage_keys boolean NOT NULL DEFAULT false;`,
  },
  {
    id: 8,
    name: "dedicated deployments and their metered instance time",
    sql: `
      -- A deployment: an account's private copy of a catalog model on its own instances. owner_id is
      -- the server process (server_owners) that runs it; NULL or a dead owner: the next to start adopts it.
      CREATE TABLE deployments (
        id              text PRIMARY KEY,
        account_id      text NOT NULL REFERENCES accounts (id),
        model           text NOT NULL,
        name            text NOT NULL,
        status          text NOT NULL,
        fail_reason     text,
        min_instances   integer NOT NULL,
        max_instances   integer NOT NULL,
        max_batch_size  integer NOT NULL,
        owner_id        text,
        created_at      timestamptz NOT NULL DEFAULT now(),
        updated_at      timestamptz NOT NULL DEFAULT now(),
        deleted_at      timestamptz
      );

      CREATE UNIQUE INDEX deployments_account_name_idx ON deployments (account_id, name) WHERE deleted_at IS NULL;

      -- One row per instance from the moment it runs until it stops: heartbeat_at proves it still
      -- ran; billed_until is how far deployment_usage already bills it. A dead owner's open row is
      -- closed at its last heartbeat. Times are whole milliseconds.
      CREATE TABLE deployment_instances (
        id             text PRIMARY KEY,
        deployment_id  text NOT NULL REFERENCES deployments (id),
        owner_id       text NOT NULL,
        hourly_usd     numeric NOT NULL,
        started_at     timestamptz NOT NULL,
        heartbeat_at   timestamptz NOT NULL,
        billed_until   timestamptz NOT NULL,
        ended_at       timestamptz
      );

      CREATE INDEX deployment_instances_open_idx ON deployment_instances (deployment_id) WHERE ended_at IS NULL;

      -- The instance-time ledger: billed segments, at most one per (instance, start), written in the
      -- same transaction that advances billed_until, so each millisecond is billed exactly once.
      CREATE TABLE deployment_usage (
        instance_id    text NOT NULL REFERENCES deployment_instances (id),
        start_at       timestamptz NOT NULL,
        end_at         timestamptz NOT NULL,
        deployment_id  text NOT NULL REFERENCES deployments (id),
        account_id     text NOT NULL REFERENCES accounts (id),
        model_id       text NOT NULL,
        seconds        numeric NOT NULL,
        hourly_usd     numeric NOT NULL,
        cost_usd       numeric NOT NULL,
        PRIMARY KEY (instance_id, start_at)
      );

      CREATE INDEX deployment_usage_account_idx ON deployment_usage (account_id, start_at);
    `,
  },
  {
    id: 9,
    name: "the URL each server process listens on",
    // Set once the process listens: a gateway forwards a request for a deployment another process
    // runs to that process's URL. NULL until then (and for rows of processes older than this).
    sql: `ALTER TABLE server_owners ADD COLUMN url text;`,
  },
  {
    id: 10,
    name: "manage-deployments right, and the key whose budget pays a deployment",
    // No existing key gains the right. deployments.key_id: the key that created the deployment;
    // its budget pays the instance time (NULL for deployments from before: no budget applies).
    sql: `
      ALTER TABLE api_keys ADD COLUMN manage_deployments boolean NOT NULL DEFAULT false;
      ALTER TABLE deployments ADD COLUMN key_id text REFERENCES api_keys (id);
      -- Tokens per sequence an instance holds KV for; NULL: the server's context window.
      ALTER TABLE deployments ADD COLUMN context_length integer;
    `,
  },
  {
    id: 11,
    name: "files, batches and their lines",
    sql: `
      -- Uploaded and generated files (the Files API), with the SHA-256 of their bytes, checked on read.
      CREATE TABLE files (
        id          text PRIMARY KEY,
        account_id  text NOT NULL REFERENCES accounts (id),
        purpose     text NOT NULL,
        filename    text NOT NULL,
        bytes       integer NOT NULL,
        sha256      text NOT NULL,
        content     bytea NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now()
      );

      CREATE INDEX files_account_idx ON files (account_id, created_at);

      -- A batch: its input file's lines are copied into batch_lines when it is created, so the
      -- input file may be deleted while the batch runs. key_id: the key that created it, whose
      -- budget and limits each line is run under. Times as OpenAI reports them; expires_at is the
      -- end of the completion window.
      CREATE TABLE batches (
        id                 text PRIMARY KEY,
        account_id         text NOT NULL REFERENCES accounts (id),
        key_id             text NOT NULL REFERENCES api_keys (id),
        endpoint           text NOT NULL,
        input_file_id      text NOT NULL,
        completion_window  text NOT NULL,
        status             text NOT NULL,
        metadata           text,
        errors             text,
        output_file_id     text,
        error_file_id      text,
        total              integer NOT NULL DEFAULT 0,
        completed          integer NOT NULL DEFAULT 0,
        failed             integer NOT NULL DEFAULT 0,
        enqueued_tokens    bigint NOT NULL DEFAULT 0,
        -- The server process (server_owners) running the batch; NULL or a dead owner: the next adopts it.
        owner_id           text,
        created_at         timestamptz NOT NULL DEFAULT now(),
        expires_at         timestamptz NOT NULL,
        in_progress_at     timestamptz,
        finalizing_at      timestamptz,
        completed_at       timestamptz,
        failed_at          timestamptz,
        expired_at         timestamptz,
        cancelling_at      timestamptz,
        cancelled_at       timestamptz
      );

      CREATE INDEX batches_account_idx ON batches (account_id, created_at);
      CREATE INDEX batches_active_idx ON batches (status) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

      -- One row per input line. A line is answered once: request_id is the ledger row of the
      -- attempt whose answer it keeps, written in the same transaction as the answer.
      CREATE TABLE batch_lines (
        batch_id          text NOT NULL REFERENCES batches (id),
        line              integer NOT NULL,
        custom_id         text NOT NULL,
        body              text NOT NULL,
        estimated_tokens  integer NOT NULL,
        done              boolean NOT NULL DEFAULT false,
        request_id        text,
        status_code       integer,
        answer            text,
        error             text,
        PRIMARY KEY (batch_id, line)
      );

      CREATE INDEX batch_lines_pending_idx ON batch_lines (batch_id, line) WHERE NOT done;

      -- The batch a ledger row's request ran for (NULL: a request of its own).
      ALTER TABLE usage_records ADD COLUMN batch_id text;
      CREATE INDEX usage_records_batch_idx ON usage_records (batch_id) WHERE batch_id IS NOT NULL;
    `,
  },
  {
    id: 12,
    name: "stored responses' input items",
    // What GET /v1/responses/{id}/input_items lists; NULL for responses stored before (none listed).
    sql: `ALTER TABLE responses ADD COLUMN input_items jsonb;`,
  },
  {
    id: 13,
    name: "stored chat completions",
    // seq orders each account's list by creation (ids are random); body is the completion as sent.
    sql: `
      CREATE TABLE chat_completions (
        id          text PRIMARY KEY,
        seq         bigserial NOT NULL,
        account_id  text NOT NULL REFERENCES accounts (id),
        model       text NOT NULL,
        metadata    jsonb NOT NULL DEFAULT '{}',
        messages    jsonb NOT NULL,
        body        text NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now()
      );

      CREATE INDEX chat_completions_account_seq_idx ON chat_completions (account_id, seq);
    `,
  },
  {
    id: 14,
    name: "stored responses by account and age",
    // Each save keeps the account's newest responses and drops expired ones (storage/stored-objects.ts).
    sql: `CREATE INDEX responses_account_created_idx ON responses (account_id, created_at);`,
  },
  {
    id: 15,
    name: "one-time passes for batch lines sent to another server process",
    // A batch line for a deployment that another process runs is forwarded there; this pass (its
    // hash only) is how that process knows the line's key and batch (accounts/batch-line-passes.ts).
    sql: `
      CREATE TABLE batch_line_passes (
        token_hash  text PRIMARY KEY,
        key_id      text NOT NULL,
        account_id  text NOT NULL,
        batch_id    text NOT NULL,
        expires_at  timestamptz NOT NULL
      );
    `,
  },
  {
    id: 16,
    name: "files stored in chunks, and large batch answers beside their lines",
    // A file's bytes go in as 256 KiB chunks, each statement short, so neither an upload nor a
    // batch's output holds the (single-threaded, embedded) database for long; a file is listed once
    // complete. Files stored before keep their bytes in files.content. A batch line's large answer
    // is kept in chunks too (batch_answer_chunks, under the attempt that wrote it), and
    // batches.output_bytes counts what the batch's answers will write, against the account's quota.
    sql: `
      ALTER TABLE files ALTER COLUMN content DROP NOT NULL;
      ALTER TABLE files ADD COLUMN complete boolean NOT NULL DEFAULT true;
      CREATE TABLE file_chunks (
        file_id  text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
        seq      integer NOT NULL,
        sha256   text NOT NULL,
        content  bytea NOT NULL,
        PRIMARY KEY (file_id, seq)
      );
      ALTER TABLE batches ADD COLUMN output_bytes bigint NOT NULL DEFAULT 0;
      ALTER TABLE batch_lines ADD COLUMN answer_attempt text;
      CREATE TABLE batch_answer_chunks (
        batch_id  text NOT NULL,
        line      integer NOT NULL,
        attempt   text NOT NULL,
        seq       integer NOT NULL,
        content   text NOT NULL,
        PRIMARY KEY (batch_id, line, attempt, seq)
      );
    `,
  },
  {
    id: 17,
    name: "predicted outputs on ledger rows",
    // OpenAI's accepted_prediction_tokens and rejected_prediction_tokens; the rejected ones are
    // billed, and already counted in completion_tokens. Rows written before hold 0.
    sql: `
      ALTER TABLE usage_records ADD COLUMN accepted_prediction_tokens integer NOT NULL DEFAULT 0;
      ALTER TABLE usage_records ADD COLUMN rejected_prediction_tokens integer NOT NULL DEFAULT 0;
    `,
  },
  {
    id: 18,
    name: "uploaded LoRA adapters",
    // An account's adapter (POST /v1/adapters), served as <account name>/<name>: the GGUF LoRA it
    // was converted to lies in the data dir of the server that took the upload (adapters/<id>.lora.gguf),
    // with this size and hash. A live name is unique in its account (a deployment's name is checked
    // under the account row's lock); a deleted row keeps its name for nobody.
    sql: `
      CREATE TABLE adapters (
        id           text PRIMARY KEY,
        account_id   text NOT NULL REFERENCES accounts (id),
        name         text NOT NULL,
        base_model   text NOT NULL,
        format       text NOT NULL,
        bytes        bigint NOT NULL,
        sha256       text NOT NULL,
        status       text NOT NULL,
        fail_reason  text,
        created_at   timestamptz NOT NULL DEFAULT now(),
        deleted_at   timestamptz
      );

      CREATE UNIQUE INDEX adapters_live_name_idx ON adapters (account_id, name) WHERE deleted_at IS NULL;
    `,
  },
  {
    id: 19,
    name: "background responses and their events",
    // A background response (background: true) is stored as it is created, with its status
    // (NULL for a response stored once finished) and the server process that runs it, so one
    // left unfinished by a dead process can be failed. Its stream's events are kept with it, for
    // GET ?stream=true&starting_after=N, and go with it (pruned, expired or deleted).
    sql: `
      ALTER TABLE responses ADD COLUMN status text;
      ALTER TABLE responses ADD COLUMN owner_id text;
      CREATE INDEX responses_unfinished_idx ON responses (account_id) WHERE status IN ('queued', 'in_progress');

      CREATE TABLE response_events (
        response_id  text NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
        seq          integer NOT NULL,
        data         text NOT NULL,
        PRIMARY KEY (response_id, seq)
      );
    `,
  },
];

/**
 * Any fixed number works; it only has to be the same in every Switchyard process sharing a
 * PostgreSQL database, and unlikely to collide with another application's advisory locks.
 */
const MIGRATION_LOCK_KEY = 7_304_117_652_019_241n;

/**
 * Applies every migration not yet recorded in schema_migrations, in id order, each in its own
 * transaction. On PostgreSQL each transaction first takes an advisory lock, so two processes
 * starting at once apply each migration exactly once (the second waits, then sees it recorded).
 * Returns the ids applied by this call.
 */
export async function migrate(db: Database, list: readonly Migration[] = migrations): Promise<number[]> {
  assertOrdered(list);

  await db.transaction(async (tx) => {
    await lockMigrations(tx);
    await tx.query(`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        id          integer PRIMARY KEY,
        name        text NOT NULL,
        applied_at  timestamptz NOT NULL DEFAULT now()
      )
    `);
  });

  const applied: number[] = [];
  for (const migration of list) {
    const appliedNow = await db.transaction(async (tx) => {
      await lockMigrations(tx);
      const existing = await tx.query("SELECT 1 FROM schema_migrations WHERE id = $1", [migration.id]);
      if (existing.length > 0) return false;
      await tx.query(migration.sql);
      await tx.query("INSERT INTO schema_migrations (id, name) VALUES ($1, $2)", [migration.id, migration.name]);
      return true;
    });
    if (appliedNow) applied.push(migration.id);
  }
  return applied;
}

async function lockMigrations(tx: Database): Promise<void> {
  // PGlite has a single connection and a single process: nothing to race against.
  if (tx.kind !== "postgres") return;
  await tx.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY.toString()]);
}

function assertOrdered(list: readonly Migration[]): void {
  list.forEach((migration, index) => {
    const previous = list[index - 1];
    if (!Number.isInteger(migration.id) || migration.id < 1 || (previous && migration.id <= previous.id)) {
      throw new Error(
        `Migration ids must be positive integers in strictly increasing order; check migration ${migration.id} (${migration.name}).`,
      );
    }
  });
}
