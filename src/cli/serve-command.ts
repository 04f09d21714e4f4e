import { Command } from "commander";
import { settingsHelp } from "../config/settings-help.js";
import type { ServeFlags } from "./serve.js";

/**
 * `switchyard serve`. The server's modules (HTTP, storage, llama.cpp) load only when it runs:
 * every other command (`keys create`, `usage`, ...) started a second sooner without them.
 */
export function serveCommand(): Command {
  // The help ends with every setting, from the table docs/operations/settings.md is generated from.
  return new Command("serve")
    .description("Pull the catalog's models if needed and serve the chat-completions API")
    .option("--host <host>", "address to listen on (SWITCHYARD_HOST)", undefined)
    .option("--port <port>", "port to listen on (SWITCHYARD_PORT)", undefined)
    .option("--data-dir <dir>", "where this server keeps its database (SWITCHYARD_DATA_DIR)")
    .option("--models <ids>", "comma-separated catalog ids to serve (SWITCHYARD_MODELS); default all")
    .option("--catalog <file>", "an extra catalog file of your own models (SWITCHYARD_CATALOG)")
    .option("--worker", "serve only the engine API for a gateway in front of this process (needs SWITCHYARD_WORKER_KEY)")
    .addHelpText("after", `\n${settingsHelp()}`)
    .action(async (flags: ServeFlags) => {
      const { serve } = await import("./serve.js");
      await serve(flags);
    });
}
