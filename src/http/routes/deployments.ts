import type { FastifyInstance } from "fastify";
import { NotFound } from "../../errors.js";
import { createDeploymentBody, listDeploymentsQuery, scaleDeploymentBody } from "../../protocol/deployments-request.js";
import type { Deployment, DeploymentCaller, DeploymentService } from "../../deployments/types.js";
import { callerOf, managerOf } from "../auth.js";
import { parse } from "../../protocol/parse-input.js";
import { route, type RouteSpec } from "../route-spec.js";

const deploymentId = [{ name: "id", description: "The deployment's id (`dep_…`)." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const deploymentOperations = {
  create: {
    method: "post",
    path: "/v1/deployments",
    id: "createDeployment",
    summary:
      "Deploy a catalog model marked dedicated as a private endpoint of the caller's account (instances load in the background). Needs the manage-deployments right (403), a model the key may use (404), budget for a billed segment per instance (402), room in the account's caps (400 too_many_deployments / too_many_instances) and in memory (400 insufficient_memory)",
    auth: "key",
    body: createDeploymentBody,
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
} satisfies Record<string, RouteSpec>;

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

/**
 * Dedicated deployments of the calling key's own account. Another account's deployment id is the
 * same 404 as an id that does not exist. Creating, scaling and deleting need a key with the
 * manage-deployments right (they spend the machine's memory and the key's budget); listing and
 * reading do not: any key of the account already sees its deployments' ids in /v1/models.
 */
export function deploymentRoutes(app: FastifyInstance, deployments: DeploymentService): void {
  const missing = (id: string) => new NotFound(`No deployment with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}'.`);
  const account = (request: Parameters<typeof callerOf>[0]) => {
    const caller = callerOf(request);
    return { accountId: caller.accountId, accountName: caller.accountName };
  };
  const deployer = (request: Parameters<typeof callerOf>[0]): DeploymentCaller => {
    const caller = managerOf(request, "deployments");
    return { accountId: caller.accountId, accountName: caller.accountName, keyId: caller.keyId, allowedModels: caller.allowedModels };
  };

  route(app, deploymentOperations.create, async (request) => {
    const caller = deployer(request);
    const body = parse(createDeploymentBody, request.body ?? {});
    const settings = {
      minInstances: body.min_instances,
      maxInstances: body.max_instances,
      maxBatchSize: body.max_batch_size,
      contextLength: body.context_length ?? undefined,
    };
    return toWireDeployment(await deployments.create(caller, { model: body.model, name: body.name, settings }));
  });

  route(app, deploymentOperations.list, async (request) => {
    const query = parse(listDeploymentsQuery, request.query ?? {});
    const list = await deployments.list(account(request), { status: query.status });
    return { object: "list", data: list.map(toWireDeployment) };
  });

  route<{ Params: { id: string } }>(app, deploymentOperations.get, async (request) => {
    const found = await deployments.get(account(request), request.params.id);
    if (!found) throw missing(request.params.id);
    return toWireDeployment(found);
  });

  route<{ Params: { id: string } }>(app, deploymentOperations.scale, async (request) => {
    const caller = deployer(request);
    const body = parse(scaleDeploymentBody, request.body ?? {});
    const scaled = await deployments.scale(caller, request.params.id, {
      minInstances: body.min_instances,
      maxInstances: body.max_instances,
    });
    if (!scaled) throw missing(request.params.id);
    return toWireDeployment(scaled);
  });

  route<{ Params: { id: string } }>(app, deploymentOperations.delete, async (request) => {
    const removed = await deployments.remove(deployer(request), request.params.id);
    if (!removed) throw missing(request.params.id);
    return toWireDeployment(removed);
  });
}
