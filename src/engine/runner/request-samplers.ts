import koffi from "koffi";
import type { Handle, LlamaLibrary } from "../native/llama-lib.js";
import type { SamplerSpec } from "./step-protocol.js";

/**
 * A request's sampler chain, and its grammar when that is checked lazily (see `sample`).
 * `grammar` is null when the chain holds the grammar itself, or there is none.
 */
interface RequestSampler {
  chain: Handle;
  grammar: Handle | null;
}

/** Most generated tokens the penalties look back over. */
const PENALTY_WINDOW = 1024;
/** llama_token_data_array: data pointer, size, selected, sorted (padded to 8). */
const ARRAY_HEADER_BYTES = 32;
/** llama_token_data: id (int32), logit (float), p (float). */
const TOKEN_DATA_BYTES = 12;

/**
 * The samplers of one runner thread: each request's chain, built as llama-server builds it, and
 * the sampling of a token at a batch index with it.
 *
 * A grammar constrains every token, and llama.cpp's grammar sampler is costly over the whole
 * vocabulary: each of its 49k-152k tokens' text is run through the grammar's stacks, every token.
 * So, as llama-server does (common_sampler), the chain samples first without the grammar and the
 * grammar checks only the token drawn; only a token the grammar refuses costs the full pass, and
 * the token is then drawn again from the grammar's candidates.
 * - Greedy, this is exactly the grammar-first result: the best token, if allowed, is the best allowed one.
 * - Sampled without truncation, a rejected draw followed by a draw from the allowed tokens gives each
 *   allowed token p(x)/p(allowed): the constrained distribution, exactly.
 * - With top-k/top-p/min-p, the truncation sees the unconstrained distribution first, as llama-server's does.
 * Penalties remember each accepted token, and a refused draw was accepted by the chain already, so
 * a chain with penalties keeps the grammar inside it (grammar first, every token).
 */
export function createRequestSamplers(lib: LlamaLibrary, vocab: Handle, context: Handle, vocabularySize: number) {
  const samplers = new Map<number, RequestSampler>();
  const candidates = candidateArray(lib, vocabularySize);

  /** Every token, as the logits at `index` give them, through the grammar and then the chain. */
  const resample = ({ chain, grammar }: RequestSampler, index: number): number => {
    candidates.fill(new Float32Array(koffi.view(lib.llama_get_logits_ith(context, index), vocabularySize * 4)));
    candidates.apply(grammar!, vocabularySize);
    return candidates.tokenAt(candidates.apply(chain, vocabularySize));
  };

  return {
    /** Builds the request's chain, which goes on from `history`; throws if llama.cpp cannot parse its grammar. */
    add(id: number, spec: SamplerSpec, history: readonly number[] = []): void {
      const sampler = buildSampler(lib, vocab, vocabularySize, spec);
      for (const token of history) {
        lib.llama_sampler_accept(sampler.chain, token);
        if (sampler.grammar !== null) lib.llama_sampler_accept(sampler.grammar, token);
      }
      samplers.set(id, sampler);
    },
    has: (id: number) => samplers.has(id),
    /** Samples the token at batch `index` with the request's sampler, and accepts it into its state. */
    sample(id: number, index: number): number {
      const sampler = samplers.get(id)!;
      // The chain accepts what it draws; without penalties that changes nothing a redraw depends on.
      const drawn = lib.llama_sampler_sample(sampler.chain, context, index);
      if (sampler.grammar === null) return drawn;
      const token = candidates.allows(sampler.grammar, drawn) ? drawn : resample(sampler, index);
      if (token >= 0) lib.llama_sampler_accept(sampler.grammar, token);
      return token;
    },
    free(id: number): void {
      const sampler = samplers.get(id);
      if (sampler === undefined) return;
      lib.llama_sampler_free(sampler.chain);
      if (sampler.grammar !== null) lib.llama_sampler_free(sampler.grammar);
      samplers.delete(id);
    },
    freeAll(): void {
      for (const id of [...samplers.keys()]) this.free(id);
      candidates.free();
    },
  };
}

/**
 * One native llama_token_data_array with room for the whole vocabulary, reused for every check and
 * redraw of the runner's samplers (`llama_sampler_apply` takes the array by address).
 */
function candidateArray(lib: LlamaLibrary, vocabularySize: number) {
  const bytes = ARRAY_HEADER_BYTES + vocabularySize * TOKEN_DATA_BYTES;
  const native = koffi.alloc("uint8_t", bytes);
  const address = koffi.address(native);
  const memory = koffi.view(native, bytes);
  const header = new BigInt64Array(memory, 0, 3);
  const sorted = new Uint8Array(memory, 24, 1);
  const ids = new Int32Array(memory, ARRAY_HEADER_BYTES);
  const values = new Float32Array(memory, ARRAY_HEADER_BYTES);
  const dataAddress = address + BigInt(ARRAY_HEADER_BYTES);

  /** Applies `sampler` to the first `size` entries written; returns the index it selected (-1: none). */
  const apply = (sampler: Handle, size: number): number => {
    header[0] = dataAddress;
    header[1] = BigInt(size);
    header[2] = -1n;
    sorted[0] = 0;
    lib.llama_sampler_apply(sampler, address);
    // This release's samplers work in place; one that moved the data would leave nothing to read here.
    if (header[0] !== dataAddress) throw new Error("a llama.cpp sampler moved the candidate array");
    return Number(header[2]);
  };

  return {
    apply,
    /** Every token with its logit, in token order. */
    fill(logits: Float32Array): void {
      for (let token = 0; token < vocabularySize; token++) {
        ids[token * 3] = token;
        values[token * 3 + 1] = logits[token]!;
        values[token * 3 + 2] = 0;
      }
    },
    /** The token at a selected index (-1 for none). */
    tokenAt: (selected: number): number => (selected < 0 ? -1 : ids[selected * 3]!),
    /** Whether the grammar, in its current state, allows `token` next. */
    allows(grammar: Handle, token: number): boolean {
      ids[0] = token;
      values[1] = 0;
      values[2] = 0;
      apply(grammar, 1);
      return values[1] !== -Infinity;
    },
    free: () => koffi.free(native),
  };
}

/** The chain llama-server builds, in its order: bias, penalties, grammar, truncations, temperature, draw. */
function buildSampler(lib: LlamaLibrary, vocab: Handle, vocabularySize: number, spec: SamplerSpec): RequestSampler {
  const penalties = spec.presencePenalty !== 0 || spec.frequencyPenalty !== 0 || spec.repetitionPenalty !== 1;
  let grammar: Handle | null = null;
  if (spec.grammar !== undefined) {
    grammar = lib.llama_sampler_init_grammar(vocab, spec.grammar, "root");
    if (!grammar) throw new Error("llama.cpp could not parse the grammar");
  }
  const chain = lib.llama_sampler_chain_init({ no_perf: true });
  const add = (sampler: Handle) => lib.llama_sampler_chain_add(chain, sampler);
  if (spec.logitBias.length > 0) {
    add(
      lib.llama_sampler_init_logit_bias(
        vocabularySize,
        spec.logitBias.length,
        spec.logitBias.map(([token, bias]) => ({ token, bias })),
      ),
    );
  }
  if (penalties) add(lib.llama_sampler_init_penalties(PENALTY_WINDOW, spec.repetitionPenalty, spec.frequencyPenalty, spec.presencePenalty));
  // The chain owns what is added to it: a grammar in the chain is freed with it.
  if (grammar !== null && penalties) {
    add(grammar);
    grammar = null;
  }
  if (spec.temperature <= 0) {
    add(lib.llama_sampler_init_greedy());
    return { chain, grammar };
  }
  if (spec.topK > 0) add(lib.llama_sampler_init_top_k(spec.topK));
  if (spec.topP < 1) add(lib.llama_sampler_init_top_p(spec.topP, 1));
  if (spec.minP > 0) add(lib.llama_sampler_init_min_p(spec.minP, 1));
  add(lib.llama_sampler_init_temp(spec.temperature));
  add(lib.llama_sampler_init_dist(spec.seed >>> 0));
  return { chain, grammar };
}
