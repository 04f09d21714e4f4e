/**
 * Dedicated deployments of the calling key's own account. Another account's deployment id is the
 * same 404 as an id that does not exist. Creating, scaling and deleting need a key with the
 * manage-deployments right (they spend the machine's memory and the key's budget); listing and
 * reading do not: any key of the account already sees its deployments' ids in /v1/models.
 */
import type { Deployment, DeploymentCaller, DeploymentService } from "../../deployments/types.js";
import { NotFound } from "../../errors.js";
import { createDeploymentBody, listDeploymentsQuery, scaleDeploymentBody } from "../../protocol/deployments-request.js";
import { listOf } from "../../protocol/list-page.js";
import type { Principal } from "../../protocol/principal.js";
import { json, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";
import { mayManageDeployments } from "../manage-deployments.js";
import type { z } from "zod";

const deploymentId = [{ name: "id", description: "The deployment's id (`dep_…`)." }];

export const deploymentSpecs = {
  create: {
    method: "post",
    path: "/v1/deployments",
    id: "createDeployment",
    summary:
      "Deploy a catalog model marked dedicated as a private endpoint of the caller's account (instances load in the background). Needs the manage-deployments right (403), a model the key may use (404), budget for a billed segment per instance (402), room in the account's caps (400 too_many_deployments / too_many_instances) and in memory (400 insufficient_memory)",
    auth: "key",
    body: createDeploymentBody,
    bodyOptional: true,
    response: {
      description:
        "The deploy object: id, model, name, model_id (`<account>/<name>`, what requests name as `model`), status, fail_reason, instances {running, pending}, settings, created_at, updated_at.",
    },
    errors: [400, 401, 402, 403, 404],
  },
  list: {
    method: "get",
    path: "/v1/deployments",
    id: "listDeployments",
    summary: "The caller's account's deployments (deleted ones only with status=deleted)",
    auth: "key",
    query: listDeploymentsQuery,
    response: { description: '`{object: "list", data: [deployment]}`' },
    errors: [400, 401],
  },
  get: {
    method: "get",
    path: "/v1/deployments/{id}",
    id: "getDeployment",
    summary: "One deployment of the caller's account",
    auth: "key",
    pathParams: deploymentId,
    response: { description: "The deploy object." },
    errors: [401, 404],
  },
  scale: {
    method: "patch",
    path: "/v1/deployments/{id}",
    id: "scaleDeployment",
    summary:
      "Change min_instances / max_instances (0 stops it and its billing). Needs the manage-deployments right; a scale-up is checked against budget, caps and memory like a create",
    auth: "key",
    body: scaleDeploymentBody,
    bodyOptional: true,
    pathParams: deploymentId,
    response: { description: "The deploy object." },
    errors: [400, 401, 402, 403, 404],
  },
  delete: {
    method: "delete",
    path: "/v1/deployments/{id}",
    id: "deleteDeployment",
    summary: "Drain its requests in flight, unload it, stop its billing (needs the manage-deployments right)",
    auth: "key",
    pathParams: deploymentId,
    response: { description: "The deploy object, status `deleted`." },
    errors: [401, 403, 404],
  },
} satisfies Record<string, EndpointSpec>;

/** The deploy object. */
export function toWireDeployment(d: Deployment) {
  return {
    id: d.id,
    object: "deployment" as const,
    model: d.model,
    name: d.name,
    model_id: d.modelId,
    status: d.status,
    fail_reason: d.failReason,
    instances: d.instances,
    settings: {
      min_instances: d.settings.minInstances,
      max_instances: d.settings.maxInstances,
      max_batch_size: d.settings.maxBatchSize,
      context_length: d.settings.contextLength,
    },
    created_at: Math.floor(d.createdAt.getTime() / 1000),
    updated_at: Math.floor(d.updatedAt.getTime() / 1000),
  };
}

const missing = (id: string) => new NotFound(`No deployment with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}'.`);
/** What the service is told of the caller: its account, and for a change, its key and the models it may use. */
const account = (caller: Principal) => ({ accountId: caller.accountId, accountName: caller.accountName });
const deployer = (caller: Principal): DeploymentCaller => ({
  ...account(caller),
  keyId: caller.keyId,
  allowedModels: caller.allowedModels,
});

type ById<Body = unknown> = EndpointInput<{ id: string }, unknown, Body>;

export function deploymentEndpoints(deployments: DeploymentService): Endpoint[] {
  const authorize = mayManageDeployments("deployments");
  const create: Endpoint<EndpointInput<unknown, unknown, z.infer<typeof createDeploymentBody>>> = {
    ...deploymentSpecs.create,
    authorize,
    async run(caller, { body }) {
      const settings = {
        minInstances: body.min_instances,
        maxInstances: body.max_instances,
        maxBatchSize: body.max_batch_size,
        contextLength: body.context_length ?? undefined,
      };
      return json(toWireDeployment(await deployments.create(deployer(caller), { model: body.model, name: body.name, settings })));
    },
  };
  const list: Endpoint<EndpointInput<unknown, z.infer<typeof listDeploymentsQuery>>> = {
    ...deploymentSpecs.list,
    async run(caller, { query }) {
      const found = await deployments.list(account(caller), { status: query.status });
      return json(listOf(found.map(toWireDeployment)));
    },
  };
  const get: Endpoint<ById> = {
    ...deploymentSpecs.get,
    run: async (caller, { params }) => json(toWireDeployment(orMissing(await deployments.get(account(caller), params.id), params.id))),
  };
  const scale: Endpoint<ById<z.infer<typeof scaleDeploymentBody>>> = {
    ...deploymentSpecs.scale,
    authorize,
    async run(caller, { params, body }) {
      const changes = { minInstances: body.min_instances, maxInstances: body.max_instances };
      return json(toWireDeployment(orMissing(await deployments.scale(deployer(caller), params.id, changes), params.id)));
    },
  };
  const remove: Endpoint<ById> = {
    ...deploymentSpecs.delete,
    authorize,
    run: async (caller, { params }) => json(toWireDeployment(orMissing(await deployments.remove(deployer(caller), params.id), params.id))),
  };
  return [create, list, get, scale, remove];
}

function orMissing(found: Deployment | null, id: string): Deployment {
  if (!found) throw missing(id);
  return found;
}
