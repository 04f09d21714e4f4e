import { parentPort, workerData } from "node:worker_threads";
import { chatTemplateFor, PromptTemplateError } from "../chat-template.js";
import { openLlamaLibrary, type Handle } from "../native/llama-lib.js";
import { openVocabulary } from "../native/vocabulary.js";
import type { PromptJob, PromptReply, PromptWorkerInit } from "./prompt-protocol.js";

/** A prompt worker: renders the chat template and tokenizes, one job at a time. */
const init = workerData as PromptWorkerInit;
const lib = openLlamaLibrary(init.libraryDir, { quietLogs: false });
const vocabulary = openVocabulary(lib, lib.llama_model_get_vocab(init.model as Handle), { bounds: false });
const template = chatTemplateFor({ ...vocabulary, chatTemplate: init.templateSource });

parentPort!.on("message", (job: PromptJob) => {
  let reply: PromptReply;
  try {
    const rendered =
      job.kind === "chat"
        ? template.tokenize(job.messages, job.tools, job.options)
        : { tokens: vocabulary.tokenize(job.text, { addSpecial: job.addSpecial }), opensThinking: false };
    reply = { id: job.id, tokens: Int32Array.from(rendered.tokens), opensThinking: rendered.opensThinking };
  } catch (error) {
    reply = { id: job.id, error: (error as Error).message, refused: error instanceof PromptTemplateError };
  }
  parentPort!.postMessage(reply, "tokens" in reply ? [reply.tokens.buffer as ArrayBuffer] : []);
});
parentPort!.postMessage({ type: "ready" });
