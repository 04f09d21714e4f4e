import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import koffi from "koffi";
import "./llama-structs.js";

/**
 * The one seam between the engine and llama.cpp: its C API, bound through koffi to the shared
 * libraries that node-llama-cpp's prebuilt npm package ships (nothing is compiled). Every opaque
 * handle is a BigInt address, so a handle made on one thread can be used on another.
 *
 * The struct layouts below mirror `llama.h` of llama.cpp release v0.5.0 as bundled by node-llama-cpp
 * 3.22.1; `openLlamaLibrary` refuses any other pair rather than call through a wrong layout.
 */
export const CHECKED_NODE_LLAMA_CPP = "3.22.1";
export const CHECKED_LLAMA_RELEASE = "v0.5.0";

export type Handle = number | bigint;

const require = createRequire(import.meta.url);

const ThreadpoolNew = koffi.proto("uintptr_t ggml_threadpool_new_fn(ggml_threadpool_params *params)");
const LogCallback = koffi.proto("void llama_log_cb(int level, const char *text, void *user)");

export interface ModelParamsValue extends Record<string, unknown> {
  n_gpu_layers: number;
  load_mode: number;
  use_extra_bufts: boolean;
}
export interface ContextParamsValue extends Record<string, unknown> {
  n_ctx: number;
  n_batch: number;
  n_ubatch: number;
  n_seq_max: number;
  n_threads: number;
  n_threads_batch: number;
  flash_attn_type: number;
  kv_unified: boolean;
  no_perf: boolean;
}
export interface BatchValue {
  n_tokens: number;
  token: Handle;
  embd: Handle | null;
  pos: Handle;
  n_seq_id: Handle;
  seq_id: Handle;
  logits: Handle;
}

/** The llama.cpp calls the engine makes; names and argument order follow `llama.h`. */
export interface LlamaLibrary {
  readonly libraryDir: string;
  llama_model_default_params(): ModelParamsValue;
  llama_context_default_params(): ContextParamsValue;
  llama_model_load_from_file(path: string, params: ModelParamsValue): Handle;
  llama_model_free(model: Handle): void;
  llama_model_get_vocab(model: Handle): Handle;
  llama_model_n_ctx_train(model: Handle): number;
  llama_model_chat_template(model: Handle, name: string | null): string | null;
  llama_model_meta_val_str(model: Handle, key: string, buffer: Buffer, size: number): number;
  llama_init_from_model(model: Handle, params: ContextParamsValue): Handle;
  llama_free(context: Handle): void;
  llama_attach_threadpool(context: Handle, pool: Handle, batchPool: Handle): void;
  llama_set_n_threads(context: Handle, threads: number, batchThreads: number): void;
  llama_get_memory(context: Handle): Handle;
  llama_memory_clear(memory: Handle, data: boolean): void;
  llama_memory_seq_rm(memory: Handle, seq: number, p0: number, p1: number): boolean;
  llama_memory_seq_cp(memory: Handle, src: number, dst: number, p0: number, p1: number): void;
  llama_memory_seq_pos_max(memory: Handle, seq: number): number;
  llama_state_seq_get_size(context: Handle, seq: number): number;
  llama_state_seq_get_data(context: Handle, out: Buffer, size: number, seq: number): number;
  llama_state_seq_set_data(context: Handle, data: Buffer, size: number, seq: number): number;
  llama_batch_init(tokens: number, embd: number, seqMax: number): BatchValue;
  llama_batch_free(batch: BatchValue): void;
  llama_decode(context: Handle, batch: BatchValue): number;
  llama_get_logits_ith(context: Handle, index: number): Handle;
  llama_get_embeddings_seq(context: Handle, seq: number): Handle;
  llama_model_n_embd(model: Handle): number;
  llama_pooling_type(context: Handle): number;
  llama_vocab_n_tokens(vocab: Handle): number;
  llama_vocab_is_eog(vocab: Handle, token: number): boolean;
  llama_vocab_is_control(vocab: Handle, token: number): boolean;
  llama_vocab_bos(vocab: Handle): number;
  llama_vocab_eos(vocab: Handle): number;
  llama_vocab_type(vocab: Handle): number;
  llama_vocab_get_attr(vocab: Handle, token: number): number;
  llama_vocab_get_text(vocab: Handle, token: number): string;
  llama_vocab_get_add_bos(vocab: Handle): boolean;
  llama_vocab_get_add_eos(vocab: Handle): boolean;
  llama_tokenize(
    vocab: Handle,
    text: Buffer,
    length: number,
    out: Int32Array,
    max: number,
    addSpecial: boolean,
    parseSpecial: boolean,
  ): number;
  llama_token_to_piece(vocab: Handle, token: number, out: Buffer, length: number, lstrip: number, special: boolean): number;
  llama_detokenize(
    vocab: Handle,
    tokens: Int32Array,
    count: number,
    out: Buffer,
    max: number,
    removeSpecial: boolean,
    unparseSpecial: boolean,
  ): number;
  llama_sampler_chain_init(params: { no_perf: boolean }): Handle;
  llama_sampler_chain_add(chain: Handle, sampler: Handle): void;
  llama_sampler_free(sampler: Handle): void;
  llama_sampler_sample(sampler: Handle, context: Handle, index: number): number;
  llama_sampler_accept(sampler: Handle, token: number): void;
  /** `array`: the address of a llama_token_data_array. */
  llama_sampler_apply(sampler: Handle, array: bigint): void;
  llama_sampler_init_greedy(): Handle;
  llama_sampler_init_dist(seed: number): Handle;
  llama_sampler_init_top_k(k: number): Handle;
  llama_sampler_init_top_p(p: number, minKeep: number): Handle;
  llama_sampler_init_min_p(p: number, minKeep: number): Handle;
  llama_sampler_init_temp(t: number): Handle;
  llama_sampler_init_grammar(vocab: Handle, grammar: string, root: string): Handle;
  llama_sampler_init_penalties(lastN: number, repeat: number, frequency: number, presence: number): Handle;
  llama_sampler_init_logit_bias(vocabSize: number, count: number, biases: { token: number; bias: number }[]): Handle;
  /** A LoRA adapter (a GGUF LoRA) for `model`; 0 when llama.cpp refuses the file (its reason goes to the log). */
  llama_adapter_lora_init(model: Handle, path: string): Handle;
  llama_adapter_lora_free(adapter: Handle): void;
  llama_adapter_meta_val_str(adapter: Handle, key: string, buffer: Buffer, size: number): number;
  /** The adapters the context's next decodes apply (none: `n` 0); 0 on success. */
  llama_set_adapters_lora(context: Handle, adapters: bigint[] | null, n: number, scales: number[] | null): number;
  /** A threadpool of `threads` workers (null when the CPU backend offers none). */
  newThreadpool(threads: number): Handle | null;
}

const DECLARATIONS = [
  "llama_model_params llama_model_default_params()",
  "llama_context_params llama_context_default_params()",
  "uintptr_t llama_model_load_from_file(const char *path, llama_model_params params)",
  "void llama_model_free(uintptr_t model)",
  "uintptr_t llama_model_get_vocab(uintptr_t model)",
  "int32_t llama_model_n_ctx_train(uintptr_t model)",
  "const char *llama_model_chat_template(uintptr_t model, const char *name)",
  "int32_t llama_model_meta_val_str(uintptr_t model, const char *key, _Out_ uint8_t *buf, size_t size)",
  "uintptr_t llama_init_from_model(uintptr_t model, llama_context_params params)",
  "void llama_free(uintptr_t ctx)",
  "void llama_attach_threadpool(uintptr_t ctx, uintptr_t pool, uintptr_t batch_pool)",
  "void llama_set_n_threads(uintptr_t ctx, int32_t n_threads, int32_t n_threads_batch)",
  "uintptr_t llama_get_memory(uintptr_t ctx)",
  "void llama_memory_clear(uintptr_t mem, bool data)",
  "bool llama_memory_seq_rm(uintptr_t mem, int32_t seq, int32_t p0, int32_t p1)",
  "void llama_memory_seq_cp(uintptr_t mem, int32_t src, int32_t dst, int32_t p0, int32_t p1)",
  "int32_t llama_memory_seq_pos_max(uintptr_t mem, int32_t seq)",
  "size_t llama_state_seq_get_size(uintptr_t ctx, int32_t seq)",
  "size_t llama_state_seq_get_data(uintptr_t ctx, _Out_ uint8_t *dst, size_t size, int32_t seq)",
  "size_t llama_state_seq_set_data(uintptr_t ctx, const uint8_t *src, size_t size, int32_t dest_seq)",
  "llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max)",
  "void llama_batch_free(llama_batch batch)",
  "int32_t llama_decode(uintptr_t ctx, llama_batch batch)",
  "uintptr_t llama_get_logits_ith(uintptr_t ctx, int32_t i)",
  "uintptr_t llama_get_embeddings_seq(uintptr_t ctx, int32_t seq_id)",
  "int32_t llama_model_n_embd(uintptr_t model)",
  "int llama_pooling_type(uintptr_t ctx)",
  "int32_t llama_vocab_n_tokens(uintptr_t vocab)",
  "bool llama_vocab_is_eog(uintptr_t vocab, int32_t token)",
  "bool llama_vocab_is_control(uintptr_t vocab, int32_t token)",
  "int32_t llama_vocab_bos(uintptr_t vocab)",
  "int32_t llama_vocab_eos(uintptr_t vocab)",
  "int llama_vocab_type(uintptr_t vocab)",
  "int llama_vocab_get_attr(uintptr_t vocab, int32_t token)",
  "const char *llama_vocab_get_text(uintptr_t vocab, int32_t token)",
  "bool llama_vocab_get_add_bos(uintptr_t vocab)",
  "bool llama_vocab_get_add_eos(uintptr_t vocab)",
  "int32_t llama_tokenize(uintptr_t vocab, const uint8_t *text, int32_t len, _Out_ int32_t *tokens, int32_t max, bool add_special, bool parse_special)",
  "int32_t llama_token_to_piece(uintptr_t vocab, int32_t token, _Out_ uint8_t *buf, int32_t length, int32_t lstrip, bool special)",
  "int32_t llama_detokenize(uintptr_t vocab, const int32_t *tokens, int32_t n_tokens, _Out_ uint8_t *text, int32_t text_len_max, bool remove_special, bool unparse_special)",
  "uintptr_t llama_sampler_chain_init(llama_sampler_chain_params params)",
  "void llama_sampler_chain_add(uintptr_t chain, uintptr_t smpl)",
  "void llama_sampler_free(uintptr_t smpl)",
  "int32_t llama_sampler_sample(uintptr_t smpl, uintptr_t ctx, int32_t idx)",
  "void llama_sampler_accept(uintptr_t smpl, int32_t token)",
  "void llama_sampler_apply(uintptr_t smpl, uintptr_t cur_p)",
  "uintptr_t llama_sampler_init_greedy()",
  "uintptr_t llama_sampler_init_dist(uint32_t seed)",
  "uintptr_t llama_sampler_init_top_k(int32_t k)",
  "uintptr_t llama_sampler_init_top_p(float p, size_t min_keep)",
  "uintptr_t llama_sampler_init_min_p(float p, size_t min_keep)",
  "uintptr_t llama_sampler_init_temp(float t)",
  "uintptr_t llama_sampler_init_grammar(uintptr_t vocab, const char *grammar, const char *root)",
  "uintptr_t llama_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present)",
  "uintptr_t llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n, const llama_logit_bias *bias)",
  "uintptr_t llama_adapter_lora_init(uintptr_t model, const char *path_lora)",
  "void llama_adapter_lora_free(uintptr_t adapter)",
  "int32_t llama_adapter_meta_val_str(uintptr_t adapter, const char *key, _Out_ uint8_t *buf, size_t size)",
  "int32_t llama_set_adapters_lora(uintptr_t ctx, const uint64_t *adapters, size_t n_adapters, const float *scales)",
];

/** The file names node-llama-cpp gives the two libraries this binding loads (the rest load by their own names). */
export const PREBUILT_FILES = {
  llama: `libllama.${CHECKED_LLAMA_RELEASE}.so`,
  ggml: `libggml.${CHECKED_LLAMA_RELEASE}.so`,
  ggmlBase: "libggml-base.so",
} as const;

/** Where node-llama-cpp's prebuilt package for this platform keeps llama.cpp's shared libraries. */
export function prebuiltLibraryDir(): string {
  const platform = `${process.platform}-${process.arch}`;
  return join(packageDir(`@node-llama-cpp/${platform}`), "bins", platform);
}

/** A package's folder, found from its entry point (these packages export no `package.json`). */
function packageDir(name: string): string {
  let dir = dirname(require.resolve(name));
  while (!dir.endsWith(join("node_modules", name))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find the folder of the package ${name}`);
    dir = parent;
  }
  return dir;
}

function checkVersions(libraryDir: string): void {
  const version = (JSON.parse(readFileSync(join(packageDir("node-llama-cpp"), "package.json"), "utf8")) as { version: string }).version;
  const metadata = JSON.parse(readFileSync(join(libraryDir, "_nlcBuildMetadata.json"), "utf8")) as {
    buildOptions?: { llamaCpp?: { release?: string } };
  };
  const release = metadata.buildOptions?.llamaCpp?.release;
  if (version !== CHECKED_NODE_LLAMA_CPP || release !== CHECKED_LLAMA_RELEASE) {
    throw new Error(
      `the engine's llama.cpp binding was checked against node-llama-cpp ${CHECKED_NODE_LLAMA_CPP} (llama.cpp ${CHECKED_LLAMA_RELEASE}), ` +
        `but node-llama-cpp ${version} (llama.cpp ${release ?? "unknown"}) is installed: its structs may differ. Run \`npm ci\` to get the pinned version.`,
    );
  }
}

let opened: LlamaLibrary | undefined;

/**
 * Loads llama.cpp once per thread (each worker thread binds its own functions to the same
 * libraries). `quietLogs` routes llama.cpp's log through this thread: only the main thread should,
 * as the callback runs on the thread that registered it.
 */
export function openLlamaLibrary(libraryDir = prebuiltLibraryDir(), { quietLogs: quiet = true } = {}): LlamaLibrary {
  if (opened) return opened;
  checkVersions(libraryDir);
  // Grammar parsing and graph building recurse; koffi's default 2 MiB call stack is too tight for them.
  koffi.config({ ...koffi.config(), sync_stack_size: 16 * 1024 * 1024 });
  const ggml = koffi.load(join(libraryDir, PREBUILT_FILES.ggml));
  const llama = koffi.load(join(libraryDir, PREBUILT_FILES.llama));
  const table: Record<string, unknown> = { libraryDir };
  for (const declaration of DECLARATIONS) {
    const fn = llama.func(declaration);
    table[/(\w+)\(/.exec(declaration)![1]!] = fn;
  }
  const regByName = ggml.func("uintptr_t ggml_backend_reg_by_name(const char *name)");
  const procAddress = ggml.func("uintptr_t ggml_backend_reg_get_proc_address(uintptr_t reg, const char *name)");
  const loadAll = ggml.func("void ggml_backend_load_all_from_path(const char *dir)");
  if (quiet) quietLogs(llama);
  // The CPU backend comes as per-microarchitecture libraries; ggml loads the best one for this CPU.
  if (!regByName("CPU")) loadAll(libraryDir);
  const cpu = regByName("CPU");
  if (!cpu) throw new Error(`llama.cpp found no CPU backend for this machine in ${libraryDir}`);
  const threadpoolNew = procAddress(cpu, "ggml_threadpool_new") as bigint;
  const paramsInit = ggml.func("void ggml_threadpool_params_init(_Out_ ggml_threadpool_params *p, int n)");
  table.newThreadpool = (threads: number): Handle | null => {
    if (!threadpoolNew) return null;
    const params: Record<string, unknown> = {};
    paramsInit(params, threads);
    // poll 0: between steps the workers sleep instead of spinning on a core another thread wants.
    params.poll = 0;
    return koffi.call(threadpoolNew, ThreadpoolNew, params) as Handle;
  };
  opened = table as unknown as LlamaLibrary;
  checkLayout(opened);
  return opened;
}

/** llama.cpp logs to stderr by default; only its errors are worth a user's attention. */
function quietLogs(llama: ReturnType<typeof koffi.load>): void {
  const logSet = llama.func("void llama_log_set(llama_log_cb *cb, void *user)");
  const callback = koffi.register((level: number, text: string) => {
    if (level === 4) process.stderr.write(`llama.cpp: ${text}`);
  }, koffi.pointer(LogCallback));
  logSet(callback, null);
}

/** A wrong struct layout shows in the defaults llama.cpp documents; refuse it before any real call. */
function checkLayout(lib: LlamaLibrary): void {
  const context = lib.llama_context_default_params();
  const model = lib.llama_model_default_params();
  const sane =
    context.n_ctx === 512 && context.n_batch === 2048 && context.n_ubatch === 512 && context.n_seq_max === 1 && model.n_gpu_layers === -1;
  if (!sane)
    throw new Error(
      `llama.cpp's parameter structs do not match this binding (n_ctx ${context.n_ctx}, n_batch ${context.n_batch}, n_gpu_layers ${model.n_gpu_layers})`,
    );
}
