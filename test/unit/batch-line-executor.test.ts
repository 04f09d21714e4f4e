import assert from "node:assert/strict";
import { test } from "node:test";
import { z } from "zod";
import type { Operation } from "../../src/api/operation.js";
import { createLineExecutor, type LineExecutorDeps } from "../../src/batches/line-executor.js";
import type { LineRequest } from "../../src/batches/runner.js";
import { RateLimited } from "../../src/errors.js";
import type { Principal } from "../../src/protocol/principal.js";

const PRINCIPAL: Principal = {
  accountId: "acct",
  accountName: "a",
  keyId: "key",
  allowedModels: null,
  limits: { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: null },
  manageKeys: false,
  manageDeployments: false,
  batchId: "batch_1",
};

const line = (body: unknown, endpoint = "/v1/chat/completions"): LineRequest => ({
  accountId: "acct",
  keyId: "key",
  batchId: "batch_1",
  endpoint,
  body: typeof body === "string" ? body : JSON.stringify(body),
});

function chatOperation(run: Operation["run"]): Operation {
  return {
    method: "post",
    path: "/chat/completions",
    id: "createChatCompletion",
    summary: "",
    auth: "key",
    body: z.object({ model: z.string(), messages: z.array(z.unknown()) }),
    response: { description: "", streams: true },
    errors: [],
    kind: "chat.completions",
    traceOperation: "chat",
    run,
  };
}

function executor(run: Operation["run"], overrides: Partial<LineExecutorDeps> = {}) {
  const logged: string[] = [];
  const execute = createLineExecutor({
    operations: new Map([["/chat/completions", chatOperation(run)]]),
    callerOf: async () => PRINCIPAL,
    track: (work) => work(new AbortController().signal),
    bodyLimit: 1024,
    maxJsonDepth: 16,
    log: (message) => logged.push(message),
    ...overrides,
  });
  return { execute, logged };
}

test("a line runs its operation directly, as the batch's caller, under a request id of its API", async () => {
  const seen: Array<{ caller: unknown; body: unknown; requestId: string }> = [];
  const { execute } = executor(async (caller, body, context) => {
    seen.push({ caller, body, requestId: context.requestId });
    return { type: "json", body: '{"id":"x"}' };
  });
  const result = await execute(line({ model: "m", messages: [] }));
  assert.equal(result.statusCode, 200);
  assert.equal(result.body, '{"id":"x"}');
  assert.equal(result.code, null);
  assert.match(result.requestId!, /^chatcmpl-/);
  assert.equal(seen[0]!.requestId, result.requestId);
  assert.deepEqual(seen[0]!.caller, PRINCIPAL);
});

test("errors answer with the status and OpenAI body of the one error map; others are a 500 whose details are logged", async () => {
  const refused = await executor(async () => {
    throw new RateLimited("slow down", 3);
  }).execute(line({ model: "m", messages: [] }));
  assert.equal(refused.statusCode, 429);
  assert.equal(refused.code, "rate_limit_exceeded");
  assert.deepEqual(JSON.parse(refused.body), {
    error: { message: "slow down", type: "rate_limit_error", param: null, code: "rate_limit_exceeded" },
  });
  assert.ok(refused.requestId);

  const { execute, logged } = executor(async () => {
    throw new Error("secret detail");
  });
  const failed = await execute(line({ model: "m", messages: [] }));
  assert.equal(failed.statusCode, 500);
  assert.equal(failed.code, "internal_error");
  assert.doesNotMatch(failed.body, /secret detail/);
  assert.match(logged.join("\n"), /secret detail/);
});

test("the body is checked as the route checks it: schema, size, faults; a key no longer valid is a 401 with no request", async () => {
  const never = async (): Promise<never> => {
    throw new Error("must not run");
  };
  const invalid = await executor(never).execute(line({ model: "m" }));
  assert.equal(invalid.statusCode, 400);
  assert.equal(invalid.code, "missing_required_parameter");
  const large = await executor(never).execute(line({ model: "m", messages: ["x".repeat(2000)] }));
  assert.equal(large.statusCode, 413);
  assert.equal(large.code, "request_too_large");
  const nul = await executor(never).execute(line({ model: "m\u0000", messages: [] }));
  assert.equal(nul.statusCode, 400);
  const gone = await executor(never, { callerOf: async () => null }).execute(line({ model: "m", messages: [] }));
  assert.equal(gone.statusCode, 401);
  assert.equal(gone.code, "invalid_api_key");
  assert.equal(gone.requestId, null);
  const unknown = await executor(never).execute(line({ model: "m" }, "/v1/embeddings"));
  assert.equal(unknown.statusCode, 404);
  assert.equal(unknown.code, "unknown_url");
});

test("a line for a deployment another process runs is forwarded there; its answer and request id are the line's", async () => {
  const forwarded: unknown[] = [];
  const { execute } = executor(
    async () => {
      throw new Error("must not run here");
    },
    {
      locate: async (_caller, model) => (model === "acct/dep" ? "http://owner:1" : null),
      forward: async (ownerUrl, sent) => {
        forwarded.push({ ownerUrl, endpoint: sent.endpoint, model: sent.model });
        return { statusCode: 429, body: '{"error":{"code":"queue_full"}}', requestId: "chatcmpl-owner" };
      },
    },
  );
  const result = await execute(line({ model: "acct/dep", messages: [] }));
  assert.deepEqual(forwarded, [{ ownerUrl: "http://owner:1", endpoint: "/v1/chat/completions", model: "acct/dep" }]);
  assert.deepEqual(result, { statusCode: 429, body: '{"error":{"code":"queue_full"}}', requestId: "chatcmpl-owner", code: "queue_full" });
});
