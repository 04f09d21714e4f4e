import type { FastifyInstance } from "fastify";
import { NotFound } from "../../errors.js";
import { createDeploymentBody, listDeploymentsQuery, scaleDeploymentBody } from "../../protocol/deployments-request.js";
import type { Deployment, DeploymentCaller, DeploymentService } from "../../deployments/types.js";
import { callerOf, managerOf } from "../auth.js";
import { parse } from "../parse-input.js";

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

  app.post("/v1/deployments", async (request) => {
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

  app.get("/v1/deployments", async (request) => {
    const query = parse(listDeploymentsQuery, request.query ?? {});
    const list = await deployments.list(account(request), { status: query.status });
    return { object: "list", data: list.map(toWireDeployment) };
  });

  app.get<{ Params: { id: string } }>("/v1/deployments/:id", async (request) => {
    const found = await deployments.get(account(request), request.params.id);
    if (!found) throw missing(request.params.id);
    return toWireDeployment(found);
  });

  app.patch<{ Params: { id: string } }>("/v1/deployments/:id", async (request) => {
    const caller = deployer(request);
    const body = parse(scaleDeploymentBody, request.body ?? {});
    const scaled = await deployments.scale(caller, request.params.id, {
      minInstances: body.min_instances,
      maxInstances: body.max_instances,
    });
    if (!scaled) throw missing(request.params.id);
    return toWireDeployment(scaled);
  });

  app.delete<{ Params: { id: string } }>("/v1/deployments/:id", async (request) => {
    const removed = await deployments.remove(deployer(request), request.params.id);
    if (!removed) throw missing(request.params.id);
    return toWireDeployment(removed);
  });
}
