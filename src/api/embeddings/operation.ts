/** `POST /embeddings` in OpenAI's shape: a list of `embedding` objects, float arrays or base64. */
import { endianness } from "node:os";
import { embeddingsRequestSchema, type EmbeddingsRequestBody } from "../../protocol/embeddings-request.js";
import { ExactDecimal, stringifyJson } from "../../protocol/money-json.js";
import { float32JsonText } from "../../protocol/float32-json.js";
import type { EmbeddingInput, EmbeddingResult, EmbeddingService } from "../../serving/embedding-service.js";
import type { Operation, OperationSpec } from "../operation.js";

export const embeddingsSpec: OperationSpec<EmbeddingsRequestBody> = {
  method: "post",
  path: "/embeddings",
  id: "createEmbedding",
  summary:
    "Embeddings of texts or token ids, from a model tagged Embedding (at most 2,048 inputs, none empty, each within the model's context: never truncated)",
  auth: "key",
  body: embeddingsRequestSchema,
  batchable: true,
  response: {
    description:
      '`{object: "list", data: [{object: "embedding", index, embedding}], model, usage: {prompt_tokens, total_tokens, estimated_cost}}`; `embedding` is floats, or base64 of little-endian float32 with `encoding_format: "base64"`.',
  },
  errors: [400, 401, 402, 404, 429, 503],
  kind: "embeddings",
  traceOperation: "embeddings",
};

export function embeddingsOperation(embeddings: EmbeddingService): Operation<EmbeddingsRequestBody> {
  return {
    ...embeddingsSpec,
    async run(caller, body, context) {
      const format = body.encoding_format ?? "float";
      const result = await embeddings.embed(caller, { ...toInput(body), json: format === "float" }, context.signal, {
        requestId: context.requestId,
        trace: context.trace,
      });
      return { type: "json", body: renderEmbeddings(result, format), rateLimits: result.rateLimits ?? {} };
    },
  };
}

/** A single string or token array is one input; an array of them is many. */
function toInput(body: EmbeddingsRequestBody): EmbeddingInput {
  const input = body.input;
  const inputs =
    typeof input === "string"
      ? [input]
      : input.length > 0 && typeof input[0] === "number"
        ? [input as number[]]
        : (input as Array<string | number[]>);
  return {
    model: body.model,
    inputs,
    ...(body.dimensions != null ? { dimensions: body.dimensions } : {}),
    ...(body.service_tier != null ? { serviceTier: body.service_tier } : {}),
  };
}

/**
 * One vector as JSON: floats, or base64 of its float32 values, little-endian, as OpenAI sends them
 * (on a little-endian host, its own bytes). Floats come written by the engine's runner thread
 * (`json`), each in at most nine significant digits, which read back to exactly the float32
 * (protocol/float32-json.ts); a vector without its text is written the same way here.
 */
function encode(vector: Float32Array, json: string | undefined, format: "float" | "base64"): string {
  if (format === "float") return json ?? float32JsonText(vector);
  if (LITTLE_ENDIAN) return `"${Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64")}"`;
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return `"${bytes.toString("base64")}"`;
}

const LITTLE_ENDIAN = endianness() === "LE";

/**
 * The vectors are written as above (the exact-decimal writer would visit each of up to 786,432
 * floats); only the usage needs its exact cost.
 */
function renderEmbeddings(result: EmbeddingResult, format: "float" | "base64"): string {
  const data = result.vectors.map(
    (vector, index) => `{"object":"embedding","index":${index},"embedding":${encode(vector, result.json?.[index], format)}}`,
  );
  const rest = stringifyJson({
    model: result.model,
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens, estimated_cost: ExactDecimal.of(result.cost) },
    service_tier: result.serviceTier,
  });
  return `{"object":"list","data":[${data.join(",")}],${rest.slice(1)}`;
}
