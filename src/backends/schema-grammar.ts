/**
 * What serving may know of the engine's grammar compiler, through the backend seam: whether a JSON
 * schema compiles as the engine will compile it (admission checks it, so a schema no grammar can
 * express is a 400 before the request reserves anything), and the number keywords no grammar
 * enforces exactly, which serving checks on the finished output.
 */
export { checkSchemaDepth, jsonSchemaToGbnf, needsOutputCheck, SchemaError, toolCallGbnf, violation } from "../engine/grammar/index.js";
