import type { FastifyInstance } from "fastify";
import type { Endpoint } from "../../api/endpoint.js";
import type { AdapterLimits } from "../../adapters/types.js";
import { registerUploadEndpoints } from "../endpoint-routes.js";
import { UploadGate } from "../upload-gate.js";

/**
 * The adapter endpoints (api/adapters/endpoints.ts); the upload reads its form in a scope of its
 * own, within the adapter limits.
 */
export function adapterRoutes(app: FastifyInstance, endpoints: Endpoint[], limits: AdapterLimits): void {
  // Up to three files (the PEFT pair or a GGUF LoRA), each one byte over the limit: the service sees the limit passed and answers 413.
  const multipartLimits = { fileSize: limits.maxBytes + 1, files: 3, fields: 4, fieldSize: 1024, parts: 8, headerPairs: 64 };
  registerUploadEndpoints(app, endpoints, new UploadGate(limits), multipartLimits);
}
