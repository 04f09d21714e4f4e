import koffi from "koffi";

/**
 * llama.cpp's structs as `llama.h` of release v0.5.0 lays them out, registered with koffi by name
 * so the function declarations in llama-lib.ts can use them. A field out of place here corrupts
 * every call that passes the struct: llama-lib.ts checks the documented defaults read back.
 */
koffi.struct("llama_model_params", {
  devices: "void *",
  tensor_buft_overrides: "void *",
  n_gpu_layers: "int32_t",
  split_mode: "int32_t",
  load_mode: "int32_t",
  lazy_mode: "int32_t",
  main_gpu: "int32_t",
  tensor_split: "void *",
  progress_callback: "void *",
  progress_callback_user_data: "void *",
  kv_overrides: "void *",
  vocab_only: "bool",
  check_tensors: "bool",
  use_extra_bufts: "bool",
  no_host: "bool",
  no_alloc: "bool",
  load_mtp: "bool",
});

koffi.struct("llama_context_params", {
  n_ctx: "uint32_t",
  n_batch: "uint32_t",
  n_ubatch: "uint32_t",
  n_seq_max: "uint32_t",
  n_rs_seq: "uint32_t",
  n_outputs_max: "uint32_t",
  n_outputs_max_per_seq: "uint32_t",
  n_threads: "int32_t",
  n_threads_batch: "int32_t",
  ctx_type: "int32_t",
  rope_scaling_type: "int32_t",
  pooling_type: "int32_t",
  attention_type: "int32_t",
  flash_attn_type: "int32_t",
  rope_freq_base: "float",
  rope_freq_scale: "float",
  yarn_ext_factor: "float",
  yarn_attn_factor: "float",
  yarn_beta_fast: "float",
  yarn_beta_slow: "float",
  yarn_orig_ctx: "uint32_t",
  defrag_thold: "float",
  cb_eval: "void *",
  cb_eval_user_data: "void *",
  type_k: "int32_t",
  type_v: "int32_t",
  abort_callback: "void *",
  abort_callback_data: "void *",
  embeddings: "bool",
  offload_kqv: "bool",
  no_perf: "bool",
  op_offload: "bool",
  swa_full: "bool",
  kv_unified: "bool",
  samplers: "void *",
  n_samplers: "size_t",
  ctx_other: "void *",
});

koffi.struct("llama_batch", {
  n_tokens: "int32_t",
  token: "void *",
  embd: "void *",
  pos: "void *",
  n_seq_id: "void *",
  seq_id: "void *",
  logits: "void *",
});

koffi.struct("llama_sampler_chain_params", { no_perf: "bool" });
koffi.struct("llama_logit_bias", { token: "int32_t", bias: "float" });

koffi.struct("ggml_threadpool_params", {
  cpumask: koffi.array("bool", 512),
  n_threads: "int",
  prio: "int32_t",
  poll: "uint32_t",
  strict_cpu: "bool",
  paused: "bool",
});
