/**
 * The subset of JSON Schema that node-llama-cpp's grammar generator honours. A schema using any
 * other keyword is refused rather than silently loosened, so an output that follows the grammar
 * always validates against the schema the caller sent.
 */
export class UnsupportedSchemaError extends Error {}

/** Keywords with no effect on the grammar that are safe to drop (annotations). */
const ANNOTATIONS = new Set(["title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly"]);
const TYPES = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);
const FORMATS = new Set(["date-time", "time", "date"]);

/** Returns the schema in the form the grammar generator takes (anyOf as oneOf, annotations dropped); throws UnsupportedSchemaError. */
export function normalizeJsonSchema(schema: unknown, path = "schema"): Record<string, unknown> {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw new UnsupportedSchemaError(`${path} must be a JSON object.`);
  const out: Record<string, unknown> = {};
  const source = schema as Record<string, unknown>;
  for (const [key, value] of Object.entries(source)) {
    const at = `${path}.${key}`;
    switch (key) {
      case "type": {
        const types = Array.isArray(value) ? value : [value];
        if (types.length === 0 || !types.every((t) => typeof t === "string" && TYPES.has(t))) throw new UnsupportedSchemaError(`${at} must be a JSON type name or a list of them.`);
        if (Array.isArray(value) && types.some((t) => t === "object" || t === "array")) throw new UnsupportedSchemaError(`${at}: a type list may only hold string, number, integer, boolean and null.`);
        out.type = value;
        break;
      }
      case "properties":
      case "$defs": {
        if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UnsupportedSchemaError(`${at} must be an object.`);
        out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, normalizeJsonSchema(sub, `${at}.${name}`)]));
        break;
      }
      case "items":
      case "additionalProperties":
        out[key] = typeof value === "boolean" && key === "additionalProperties" ? value : normalizeJsonSchema(value, at);
        break;
      case "prefixItems":
      case "oneOf":
      case "anyOf": {
        if (!Array.isArray(value) || value.length === 0) throw new UnsupportedSchemaError(`${at} must be a non-empty list of schemas.`);
        out[key === "anyOf" ? "oneOf" : key] = value.map((sub, i) => normalizeJsonSchema(sub, `${at}[${i}]`));
        break;
      }
      case "required":
        // The generator always emits every declared property, which satisfies any `required` list.
        if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) throw new UnsupportedSchemaError(`${at} must be a list of property names.`);
        break;
      case "enum":
        if (!Array.isArray(value) || value.length === 0 || !value.every(isLiteral)) throw new UnsupportedSchemaError(`${at} must be a non-empty list of strings, numbers, booleans or null.`);
        out.enum = value;
        break;
      case "const":
        if (!isLiteral(value)) throw new UnsupportedSchemaError(`${at} must be a string, number, boolean or null.`);
        out.const = value;
        break;
      case "minItems":
      case "maxItems":
      case "minLength":
      case "maxLength":
      case "minProperties":
      case "maxProperties":
        if (!Number.isInteger(value) || (value as number) < 0) throw new UnsupportedSchemaError(`${at} must be a non-negative integer.`);
        out[key] = value;
        break;
      case "format":
        if (typeof value !== "string" || !FORMATS.has(value)) throw new UnsupportedSchemaError(`${at}: only the formats date-time, time and date are supported.`);
        out.format = value;
        break;
      case "$ref":
        if (typeof value !== "string" || !value.startsWith("#/$defs/")) throw new UnsupportedSchemaError(`${at}: only references of the form '#/$defs/NAME' are supported.`);
        out.$ref = value;
        break;
      default:
        if (ANNOTATIONS.has(key)) {
          if (key === "description" && typeof value === "string") out.description = value;
          break;
        }
        throw new UnsupportedSchemaError(`${at}: the keyword '${key}' is not supported for constrained output.`);
    }
  }
  if (out.oneOf && Object.keys(out).some((k) => k !== "oneOf" && k !== "description" && k !== "$defs")) {
    throw new UnsupportedSchemaError(`${path}: anyOf/oneOf cannot be combined with other keywords.`);
  }
  if (!("type" in out) && !("oneOf" in out) && !("enum" in out) && !("const" in out) && !("$ref" in out)) {
    throw new UnsupportedSchemaError(`${path} must say its 'type' (or use enum, const, anyOf, oneOf or $ref).`);
  }
  return out;
}

function isLiteral(value: unknown): boolean {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}
