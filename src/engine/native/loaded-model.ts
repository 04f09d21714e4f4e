import { openLlamaLibrary, type Handle } from "./llama-lib.js";
import { openVocabulary, type Vocabulary } from "./vocabulary.js";

/**
 * A GGUF model loaded once per process (its weights shared by every shard's context), with what
 * the main thread needs of its vocabulary: tokenizing prompts and turning tokens back into bytes.
 */
export interface LoadedModel extends Omit<Vocabulary, "size"> {
  readonly handle: Handle;
  readonly libraryDir: string;
  readonly trainContextSize: number;
  readonly vocabularySize: number;
  /** The Jinja chat template in the GGUF's metadata, if any. */
  readonly chatTemplate: string | undefined;
  /**
   * Loads a GGUF LoRA adapter for this model: its tensors once, used by every context of the model
   * (llama.cpp frees them with the model, or `freeAdapter` before). Throws when llama.cpp refuses the file.
   */
  loadAdapter(path: string): bigint;
  /** Frees an adapter's tensors now: no context may apply it any more, and no step may be in flight. */
  freeAdapter(adapter: bigint): void;
  free(): void;
}

export function loadModel(path: string): LoadedModel {
  const lib = openLlamaLibrary();
  const params = lib.llama_model_default_params();
  params.n_gpu_layers = 0;
  const handle = lib.llama_model_load_from_file(path, params);
  if (!handle) throw new Error(`llama.cpp could not load the model file ${path} (not a GGUF it can read?)`);
  const vocabulary = openVocabulary(lib, lib.llama_model_get_vocab(handle));
  return {
    handle,
    libraryDir: lib.libraryDir,
    trainContextSize: lib.llama_model_n_ctx_train(handle),
    vocabularySize: vocabulary.size,
    chatTemplate: lib.llama_model_chat_template(handle, null) ?? undefined,
    bosText: vocabulary.bosText,
    bosToken: vocabulary.bosToken,
    eosText: vocabulary.eosText,
    maxTokenBytes: vocabulary.maxTokenBytes,
    maxTokenAlnumBytes: vocabulary.maxTokenAlnumBytes,
    tokenize: vocabulary.tokenize,
    pieceBytes: vocabulary.pieceBytes,
    tokenText: vocabulary.tokenText,
    isEndOfGeneration: vocabulary.isEndOfGeneration,
    detokenize: vocabulary.detokenize,
    loadAdapter(path) {
      const adapter = lib.llama_adapter_lora_init(handle, path);
      if (!adapter) throw new Error(`llama.cpp could not load the LoRA adapter ${path} for this model (its log says why)`);
      return BigInt(adapter);
    },
    freeAdapter: (adapter) => lib.llama_adapter_lora_free(adapter),
    free: () => lib.llama_model_free(handle),
  };
}
