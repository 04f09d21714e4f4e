import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { homedir } from "node:os";
import { ROOT } from "./server.js";

export const MINILM = "sentence-transformers/all-MiniLM-L6-v2";

/** Where the pull left the model (SWITCHYARD_MODELS_DIR or the shared cache): the zip and its GGUF. */
export function minilmDir(): string {
  const models = process.env.SWITCHYARD_MODELS_DIR ?? join(homedir(), ".cache/switchyard/models");
  return join(models, "sentence-transformers--all-MiniLM-L6-v2");
}

/** The Python with numpy and tokenizers that scripts/test-setup.sh makes; null when there is none. */
export function referencePython(): string | null {
  const python = process.env.SWITCHYARD_TEST_EMBED_PYTHON ?? join(ROOT, ".cache/py-embed/bin/python");
  return existsSync(python) ? python : null;
}

/** Hugging Face tokenizer ids and a numpy BERT forward of the same safetensors: no llama.cpp. */
export function referenceEmbeddings(
  python: string,
  sentences: string[],
  zip = join(minilmDir(), "model.zip"),
): { ids: number[][]; embeddings: number[][] } {
  const output = execFileSync(python, [join(ROOT, "test/fixtures/bert_reference.py"), zip], {
    input: JSON.stringify(sentences),
    maxBuffer: 1 << 28,
  });
  return JSON.parse(output.toString("utf8"));
}

export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}
