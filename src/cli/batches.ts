import { Command } from "commander";
import { apiClient, textTable, withApiOptions, type ApiFlags } from "./api-client.js";
import { processEnvironment } from "../config/environment.js";

export interface BatchesCommandOptions {
  /** Where output goes; tests pass a collector. Defaults to process.stdout. */
  stdout?: { write(text: string): unknown };
  env?: NodeJS.ProcessEnv;
}

/** The batch object as the API sends it (batches/wire.ts). */
interface WireBatch {
  id: string;
  endpoint: string;
  status: string;
  created_at: number;
  expires_at: number;
  output_file_id: string | null;
  error_file_id: string | null;
  request_counts: { total: number; completed: number; failed: number };
  errors: { data: Array<{ code: string; message: string; line: number | null }> } | null;
}

/**
 * `switchyard batches list|get|cancel`: the /v1/batches API of a running server, with an account's
 * API key (--api-key or SWITCHYARD_API_KEY). Batches are created with the API (files, then batches).
 */
export function batchesCommand(options: BatchesCommandOptions = {}): Command {
  const stdout = options.stdout ?? process.stdout;
  const env = options.env ?? processEnvironment();
  const print = (line = "") => stdout.write(`${line}\n`);
  const show = (flags: ApiFlags, b: WireBatch) => print(flags.json ? JSON.stringify(b, null, 2) : describe(b));
  const command = new Command("batches").description("List, inspect and cancel your account's batches (the Batch API)");

  withApiOptions(command.command("list").description("Your account's batches, newest first"))
    .option("--limit <n>", "how many (1-100, default 20)", "20")
    .action(async (flags: ApiFlags & { limit: string }) => {
      const { data } = await apiClient(flags, env)<{ data: WireBatch[] }>("GET", `/v1/batches?limit=${encodeURIComponent(flags.limit)}`);
      print(flags.json ? JSON.stringify(data, null, 2) : table(data));
    });

  withApiOptions(
    command.command("get").description("One batch: status, counts, output and error files").argument("<id>", "batch id, batch_…"),
  ).action(async (id: string, flags: ApiFlags) => {
    show(flags, await apiClient(flags, env)<WireBatch>("GET", `/v1/batches/${encodeURIComponent(id)}`));
  });

  withApiOptions(
    command
      .command("cancel")
      .description("Cancel a batch: lines running finish, the rest are not run (nor billed)")
      .argument("<id>", "batch id, batch_…"),
  ).action(async (id: string, flags: ApiFlags) => {
    show(flags, await apiClient(flags, env)<WireBatch>("POST", `/v1/batches/${encodeURIComponent(id)}/cancel`));
  });

  return command;
}

const time = (seconds: number) => new Date(seconds * 1000).toISOString().replace(".000Z", "Z");

function describe(b: WireBatch): string {
  const { total, completed, failed } = b.request_counts;
  return [
    `${b.id}  ${b.status}  ${b.endpoint}`,
    `  requests: ${completed} completed, ${failed} failed of ${total}`,
    `  created:  ${time(b.created_at)}   expires: ${time(b.expires_at)}`,
    ...(b.output_file_id ? [`  output:   ${b.output_file_id}   (GET /v1/files/${b.output_file_id}/content)`] : []),
    ...(b.error_file_id ? [`  errors:   ${b.error_file_id}   (GET /v1/files/${b.error_file_id}/content)`] : []),
    ...(b.errors?.data ?? []).slice(0, 5).map((e) => `  ${e.code}: ${e.message}`),
  ].join("\n");
}

function table(list: WireBatch[]): string {
  if (list.length === 0) return "No batches.";
  const rows = list.map((b) => [
    b.id,
    b.status,
    b.endpoint,
    `${b.request_counts.completed}/${b.request_counts.total}`,
    String(b.request_counts.failed),
    time(b.created_at),
    b.output_file_id ?? "-",
  ]);
  return textTable(["ID", "STATUS", "ENDPOINT", "DONE", "FAILED", "CREATED", "OUTPUT"], rows);
}
