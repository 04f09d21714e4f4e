/**
 * The deployment and adapter endpoints as plain functions (api/deployments/, api/adapters/): `run`
 * over in-memory fakes of their services, no Fastify, socket or model. What the services decide
 * (budget, caps, memory, conversion) is tested with them; here, what the endpoints add: the
 * manage-deployments right, the caller's account as the scope, the wire objects and the 404s.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { adapterEndpoints } from "../../src/api/adapters/endpoints.js";
import { deploymentEndpoints } from "../../src/api/deployments/endpoints.js";
import type { Endpoint, EndpointAnswer, EndpointInput } from "../../src/api/endpoint.js";
import { ENDPOINT_SPECS } from "../../src/api/registry.js";
import type { Adapter, AdapterService } from "../../src/adapters/types.js";
import type { Deployment, DeploymentService } from "../../src/deployments/types.js";
import { ServiceError } from "../../src/errors.js";
import type { FormPart } from "../../src/protocol/form-parts.js";
import type { Principal } from "../../src/protocol/principal.js";

const principal = (accountId: string, manageDeployments: boolean): Principal => ({
  accountId,
  accountName: accountId,
  keyId: `key_${accountId}_${manageDeployments ? "ops" : "app"}`,
  allowedModels: null,
  limits: { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: null },
  manageKeys: false,
  manageDeployments,
});
const manager = principal("acme", true);
const plain = principal("acme", false);
const other = principal("globex", true);

/** The answer's JSON, whichever way the endpoint wrote it. */
const value = (answer: EndpointAnswer): any => {
  if (answer.type === "json") return answer.value;
  assert.equal(answer.type, "json-text");
  return JSON.parse((answer as { text: string }).text);
};
const input = (parts: Partial<EndpointInput<any, any, any>>): EndpointInput<any, any, any> => ({
  params: {},
  query: {},
  body: undefined,
  ...parts,
});
const byId = (endpoints: Endpoint[], id: string): Endpoint => endpoints.find((e) => e.id === id)!;
const refusal = (status: number, code?: string) => (error: unknown) =>
  error instanceof ServiceError && error.status === status && (code === undefined || error.code === code);

const defined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** Deployments in memory, each its account's; what the service was asked is kept in `calls`. */
function fakeDeployments(): DeploymentService & { calls: unknown[][] } {
  const rows = new Map<string, Deployment>();
  const calls: unknown[][] = [];
  const mine = (accountId: string, id: string) => (rows.get(id)?.accountId === accountId ? rows.get(id)! : null);
  return {
    calls,
    async create(caller, { model, name, settings }) {
      calls.push(["create", caller, settings]);
      const at = new Date(1_700_000_000_000);
      const row: Deployment = {
        id: `dep_${rows.size + 1}`,
        accountId: caller.accountId,
        model,
        name,
        modelId: `${caller.accountName}/${name}`,
        status: "deploying",
        failReason: null,
        settings: { minInstances: 1, maxInstances: 1, maxBatchSize: 4, contextLength: null, ...defined(settings) },
        instances: { running: 0, pending: 1 },
        createdAt: at,
        updatedAt: at,
      };
      rows.set(row.id, row);
      return row;
    },
    list: async (caller, { status }) =>
      [...rows.values()].filter((d) => d.accountId === caller.accountId && (status ? d.status === status : d.status !== "deleted")),
    get: async (caller, id) => mine(caller.accountId, id),
    async scale(caller, id, changes) {
      calls.push(["scale", caller, changes]);
      const found = mine(caller.accountId, id);
      if (found) found.settings = { ...found.settings, ...changes };
      return found;
    },
    async remove(caller, id) {
      const found = mine(caller.accountId, id);
      if (found) found.status = "deleted";
      return found;
    },
    locate: async () => null,
    stopAccount: async () => {},
  };
}

describe("deployment endpoints as plain functions", () => {
  const service = fakeDeployments();
  const endpoints = deploymentEndpoints(service);
  const call = (id: string, caller: Principal, parts: Partial<EndpointInput<any, any, any>>) =>
    byId(endpoints, id).run(caller, input(parts));

  test("declared in the registry in the order they are made", () => {
    assert.deepEqual(
      endpoints.map((e) => e.id),
      ENDPOINT_SPECS.deployments.map((s) => s.id),
    );
  });

  test("creating, scaling and deleting need the manage-deployments right; listing and reading do not", () => {
    for (const id of ["createDeployment", "scaleDeployment", "deleteDeployment"]) {
      assert.throws(() => byId(endpoints, id).authorize!(plain), refusal(403, "missing_manage_deployments_right"), id);
      assert.doesNotThrow(() => byId(endpoints, id).authorize!(manager));
    }
    for (const id of ["listDeployments", "getDeployment"]) assert.equal(byId(endpoints, id).authorize, undefined, id);
  });

  test("create: the body's settings reach the service, the caller narrowed to its account, key and models; the deploy object comes back", async () => {
    const body = { model: "qwen", name: "mine", min_instances: 1, max_instances: 2, context_length: null };
    const created = value(await call("createDeployment", manager, { body }));
    assert.deepEqual(service.calls[0], [
      "create",
      { accountId: "acme", accountName: "acme", keyId: manager.keyId, allowedModels: null },
      { minInstances: 1, maxInstances: 2, maxBatchSize: undefined, contextLength: undefined },
    ]);
    assert.deepEqual(created, {
      id: "dep_1",
      object: "deployment",
      model: "qwen",
      name: "mine",
      model_id: "acme/mine",
      status: "deploying",
      fail_reason: null,
      instances: { running: 0, pending: 1 },
      settings: { min_instances: 1, max_instances: 2, max_batch_size: 4, context_length: null },
      created_at: 1_700_000_000,
      updated_at: 1_700_000_000,
    });
  });

  test("list, get, scale and delete: the caller's account only; another account's id is the same 404 as none", async () => {
    assert.deepEqual(
      value(await call("listDeployments", plain, { query: {} })).data.map((d: any) => d.id),
      ["dep_1"],
    );
    assert.deepEqual(value(await call("listDeployments", other, { query: {} })), { object: "list", data: [] });
    assert.equal(value(await call("getDeployment", plain, { params: { id: "dep_1" } })).model_id, "acme/mine");
    await assert.rejects(call("getDeployment", other, { params: { id: "dep_1" } }), refusal(404));
    const scaled = value(await call("scaleDeployment", manager, { params: { id: "dep_1" }, body: { max_instances: 0 } }));
    assert.equal(scaled.settings.max_instances, 0);
    await assert.rejects(call("scaleDeployment", other, { params: { id: "dep_1" }, body: {} }), refusal(404));
    await assert.rejects(call("deleteDeployment", other, { params: { id: "dep_1" } }), refusal(404));
    // An id past 64 characters is cut in the message.
    await assert.rejects(call("getDeployment", plain, { params: { id: "d".repeat(100) } }), (e: Error) =>
      e.message.includes(`'${"d".repeat(64)}...'`),
    );
    assert.equal(value(await call("deleteDeployment", manager, { params: { id: "dep_1" } })).status, "deleted");
    assert.deepEqual(value(await call("listDeployments", plain, { query: { status: "deleted" } })).data.length, 1);
  });
});

/** Adapters in memory; `upload` reads the form's parts as the real service does. */
function fakeAdapters(): AdapterService & { forms: FormPart[][] } {
  const rows = new Map<string, Adapter>();
  const forms: FormPart[][] = [];
  const mine = (accountId: string, id: string) => (rows.get(id)?.accountId === accountId ? rows.get(id)! : null);
  return {
    forms,
    async upload(caller, parts) {
      const form: FormPart[] = [];
      for await (const part of parts) form.push(part);
      forms.push(form);
      const field = (name: string) =>
        form.find((p): p is { field: string; value: string } => "field" in p && p.field === name)?.value ?? "";
      const row: Adapter = {
        id: `adp_${rows.size + 1}`,
        accountId: caller.accountId,
        name: field("name"),
        modelId: `${caller.accountName}/${field("name")}`,
        baseModel: field("base_model"),
        format: "gguf",
        bytes: 3,
        sha256: "abc",
        status: "ready",
        failReason: null,
        createdAt: new Date(1_700_000_000_500),
      };
      rows.set(row.id, row);
      return row;
    },
    list: async (caller) => [...rows.values()].filter((a) => a.accountId === caller.accountId),
    get: async (caller, id) => mine(caller.accountId, id),
    async remove(caller, id) {
      const found = mine(caller.accountId, id);
      if (found) rows.delete(id);
      return found;
    },
  };
}

describe("adapter endpoints as plain functions", () => {
  const service = fakeAdapters();
  const endpoints = adapterEndpoints(service);
  const call = (id: string, caller: Principal, parts: Partial<EndpointInput<any, any, any>>) =>
    byId(endpoints, id).run(caller, input(parts));
  async function* form(): AsyncGenerator<FormPart> {
    yield { field: "base_model", value: "qwen" };
    yield { field: "name", value: "tone" };
    yield {
      file: "adapter_gguf",
      filename: "lora.gguf",
      bytes: (async function* () {
        yield Buffer.from("GGU");
      })(),
    };
  }

  test("declared in the registry; the upload declares its form (the file fields and the parameter its faults name)", () => {
    assert.deepEqual(
      endpoints.map((e) => e.id),
      ENDPOINT_SPECS.adapters.map((s) => s.id),
    );
    const upload = byId(endpoints, "createAdapter");
    assert.deepEqual(upload.form?.files, ["adapter_config", "adapter_model", "adapter_gguf"]);
    assert.equal(upload.form?.param, "adapter_model");
    assert.equal(upload.bodyType, "multipart/form-data");
  });

  test("uploading and deleting need the manage-deployments right; listing and reading do not", () => {
    for (const id of ["createAdapter", "deleteAdapter"]) {
      assert.throws(
        () => byId(endpoints, id).authorize!(plain),
        (e: Error) => e.message.includes("cannot manage adapters"),
        id,
      );
      assert.doesNotThrow(() => byId(endpoints, id).authorize!(manager));
    }
    for (const id of ["listAdapters", "getAdapter"]) assert.equal(byId(endpoints, id).authorize, undefined, id);
  });

  test("upload hands the form's parts to the service and answers the adapter object; list, get and delete are the account's own", async () => {
    const created = value(await call("createAdapter", manager, { body: form() }));
    assert.deepEqual(
      service.forms[0]!.map((p) => ("field" in p ? p.field : p.file)),
      ["base_model", "name", "adapter_gguf"],
    );
    assert.deepEqual(created, {
      id: "adp_1",
      object: "adapter",
      model_id: "acme/tone",
      base_model: "qwen",
      name: "tone",
      format: "gguf",
      bytes: 3,
      sha256: "abc",
      status: "ready",
      fail_reason: null,
      created_at: 1_700_000_000,
    });
    assert.deepEqual(value(await call("listAdapters", plain, {})), { object: "list", data: [created] });
    assert.deepEqual(value(await call("listAdapters", other, {})).data, []);
    assert.deepEqual(value(await call("getAdapter", plain, { params: { id: "adp_1" } })), created);
    await assert.rejects(call("getAdapter", other, { params: { id: "adp_1" } }), refusal(404));
    await assert.rejects(call("deleteAdapter", other, { params: { id: "adp_1" } }), refusal(404));
    assert.deepEqual(value(await call("deleteAdapter", manager, { params: { id: "adp_1" } })), {
      id: "adp_1",
      object: "adapter",
      deleted: true,
    });
    await assert.rejects(call("getAdapter", plain, { params: { id: "adp_1" } }), refusal(404));
  });
});
