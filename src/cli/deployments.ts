import { Command, InvalidArgumentError, Option } from "commander";
import { apiClient as client, textTable, withApiOptions as withApi, type Api, type ApiFlags } from "./api-client.js";
import { DEPLOYMENT_STATUSES } from "../deployments/types.js";
import type { toWireDeployment } from "../api/deployments/endpoints.js";
import { processEnvironment } from "../config/environment.js";

export interface DeploymentsCommandOptions {
  /** Where output goes; tests pass a collector. Defaults to process.stdout. */
  stdout?: { write(text: string): unknown };
  env?: NodeJS.ProcessEnv;
}

/** The deploy object as the API sends it, declared once where the route writes it. */
type WireDeployment = ReturnType<typeof toWireDeployment>;

const WAIT_TIMEOUT_MS = 10 * 60_000;

/**
 * `switchyard deployments create|list|get|scale|delete`: the /v1/deployments API of a running
 * server, with an account's API key (--api-key or SWITCHYARD_API_KEY). The server is --url, or
 * the one running on the data dir.
 */
// long-by-design: the CLI definition, one declarative commander chain of subcommands and their options.
export function deploymentsCommand(options: DeploymentsCommandOptions = {}): Command {
  const stdout = options.stdout ?? process.stdout;
  const env = options.env ?? processEnvironment();
  const print = (line = "") => stdout.write(`${line}\n`);
  const show = (flags: ApiFlags, d: WireDeployment) => print(flags.json ? JSON.stringify(d, null, 2) : describe(d));
  const command = new Command("deployments").description(
    "Create, list, scale and delete dedicated deployments (private endpoints) of your account",
  );

  withApi(command.command("create").description("Deploy a catalog model that supports dedicated endpoints"))
    .requiredOption("--model <id>", "the catalog model, e.g. HuggingFaceTB/SmolLM2-135M-Instruct")
    .requiredOption("--name <name>", "its name; requests call it as <account>/<name>")
    .option("--min-instances <n>", "instances kept running (default 1; 0: stopped)", wholeNumber)
    .option("--max-instances <n>", "instances it may scale up to while requests queue (default: min)", wholeNumber)
    .option("--max-batch-size <n>", "requests each instance runs at once (default 4)", wholeNumber)
    .option(
      "--context-length <n>",
      "tokens one request may hold; each instance's KV cache is batch × this (default: the server's window)",
      wholeNumber,
    )
    .option("--wait", "wait until it is running (or failed)")
    .action(
      async (
        flags: ApiFlags & {
          model: string;
          name: string;
          minInstances?: number;
          maxInstances?: number;
          maxBatchSize?: number;
          contextLength?: number;
          wait?: boolean;
        },
      ) => {
        const api = client(flags, env);
        let d = await api<WireDeployment>("POST", "/v1/deployments", {
          model: flags.model,
          name: flags.name,
          min_instances: flags.minInstances,
          max_instances: flags.maxInstances,
          max_batch_size: flags.maxBatchSize,
          context_length: flags.contextLength,
        });
        if (flags.wait) d = await settled(api, d.id);
        show(flags, d);
      },
    );

  withApi(command.command("list").description("Your account's deployments"))
    .addOption(new Option("--status <status>", "only those with this status").choices(DEPLOYMENT_STATUSES))
    .action(async (flags: ApiFlags & { status?: string }) => {
      const query = flags.status ? `?status=${encodeURIComponent(flags.status)}` : "";
      const { data } = await client(flags, env)<{ data: WireDeployment[] }>("GET", `/v1/deployments${query}`);
      print(flags.json ? JSON.stringify(data, null, 2) : table(data));
    });

  withApi(command.command("get").description("One deployment").argument("<id>", "deployment id, dep_…")).action(
    async (id: string, flags: ApiFlags) => {
      show(flags, await client(flags, env)<WireDeployment>("GET", `/v1/deployments/${encodeURIComponent(id)}`));
    },
  );

  withApi(
    command
      .command("scale")
      .description("Change a deployment's min/max instances (min 0 stops it and its billing)")
      .argument("<id>", "deployment id, dep_…"),
  )
    .option("--min-instances <n>", "instances kept running", wholeNumber)
    .option("--max-instances <n>", "instances it may scale up to", wholeNumber)
    .option("--wait", "wait until the change has been applied")
    .action(async (id: string, flags: ApiFlags & { minInstances?: number; maxInstances?: number; wait?: boolean }) => {
      if (flags.minInstances === undefined && flags.maxInstances === undefined)
        throw new Error("Nothing to change: give --min-instances and/or --max-instances.");
      const api = client(flags, env);
      let d = await api<WireDeployment>("PATCH", `/v1/deployments/${encodeURIComponent(id)}`, {
        min_instances: flags.minInstances,
        max_instances: flags.maxInstances,
      });
      if (flags.wait) d = await settled(api, d.id);
      show(flags, d);
    });

  withApi(
    command
      .command("delete")
      .description("Drain a deployment's requests in flight, unload it, and stop its billing")
      .argument("<id>", "deployment id, dep_…"),
  ).action(async (id: string, flags: ApiFlags) => {
    show(flags, await client(flags, env)<WireDeployment>("DELETE", `/v1/deployments/${encodeURIComponent(id)}`));
  });

  return command;
}

/** Polls until nothing is loading or draining. */
async function settled(api: Api, id: string): Promise<WireDeployment> {
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  for (;;) {
    const d = await api<WireDeployment>("GET", `/v1/deployments/${encodeURIComponent(id)}`);
    const { running, pending } = d.instances;
    const min = d.settings.min_instances;
    const busy =
      d.status === "initializing" || d.status === "deploying" || pending > 0 || (d.status === "running" && (running < min || min === 0));
    if (!busy) return d;
    if (Date.now() > deadline) throw new Error(`Deployment ${id} is still ${d.status} after ${WAIT_TIMEOUT_MS / 60_000} minutes.`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function describe(d: WireDeployment): string {
  return [
    `${d.id}  ${d.status}${d.fail_reason ? ` (${d.fail_reason})` : ""}`,
    `  model id:  ${d.model_id}   (call it as "model": "${d.model_id}")`,
    `  model:     ${d.model}`,
    `  instances: ${d.instances.running} running, ${d.instances.pending} pending (min ${d.settings.min_instances}, max ${d.settings.max_instances}, batch ${d.settings.max_batch_size}, context ${d.settings.context_length ?? "server's"})`,
  ].join("\n");
}

function table(list: WireDeployment[]): string {
  if (list.length === 0) return "No deployments.";
  const header = ["ID", "MODEL ID", "MODEL", "STATUS", "RUNNING", "MIN", "MAX", "BATCH"];
  const rows = list.map((d) => [
    d.id,
    d.model_id,
    d.model,
    d.status,
    String(d.instances.running),
    String(d.settings.min_instances),
    String(d.settings.max_instances),
    String(d.settings.max_batch_size),
  ]);
  return textTable(header, rows);
}

function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError("Expected a whole number.");
  return Number(value);
}
