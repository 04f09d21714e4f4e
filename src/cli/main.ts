import { Command } from "commander";
import { PRIVATE_UMASK } from "../config/data-dir-permissions.js";
import { deploymentsCommand } from "./deployments.js";
import { batchesCommand } from "./batches.js";
import { keysCommand } from "./keys.js";
import { modelsCommand } from "./models.js";
import { serveCommand } from "./serve-command.js";
import { usageCommand } from "./usage.js";

// Everything any command writes (data dir, database, key files) is readable by its owner only.
process.umask(PRIVATE_UMASK);

const program = new Command("switchyard")
  .description("Self-hosted OpenAI-compatible chat completions on embedded llama.cpp models")
  .addCommand(serveCommand())
  .addCommand(modelsCommand())
  .addCommand(keysCommand())
  .addCommand(usageCommand())
  .addCommand(deploymentsCommand())
  .addCommand(batchesCommand());

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`switchyard: ${(error as Error).message}\n`);
  process.exit(1);
});
