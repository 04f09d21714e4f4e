import { Command } from "commander";
import { deploymentsCommand } from "./deployments.js";
import { keysCommand } from "./keys.js";
import { modelsCommand } from "./models.js";
import { serveCommand } from "./serve.js";
import { usageCommand } from "./usage.js";

const program = new Command("switchyard")
  .description("Self-hosted OpenAI-compatible chat completions on embedded llama.cpp models")
  .addCommand(serveCommand())
  .addCommand(modelsCommand())
  .addCommand(keysCommand())
  .addCommand(usageCommand())
  .addCommand(deploymentsCommand());

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`switchyard: ${(error as Error).message}\n`);
  process.exit(1);
});
