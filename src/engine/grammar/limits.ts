/**
 * Bounds on what a schema may ask of the grammar. A request body can hold a schema nested thousands
 * of levels deep or asking for a million repetitions; without bounds that is a stack overflow while
 * walking it, or a grammar so large that building it, or sampling under it, stalls the engine.
 */
export const SCHEMA_LIMITS = {
  /** Levels of JSON objects and arrays from the schema's root (`properties.a` is two). */
  depth: 64,
  /** Subschemas and enum values, over all the schemas of one grammar. */
  nodes: 5_000,
  /** The most any one count may be (minLength, maxLength, minItems, maxItems, ...): llama.cpp's own limit. */
  count: 2_000,
  /** The sum of all counts in one grammar: llama.cpp writes one rule per repetition. */
  countTotal: 20_000,
  /** Values in enum lists: each is an alternative that the sampler tries at every token. */
  enumValues: 1_000,
  /** Characters of literal text (property names, enum and const values). */
  literalChars: 100_000,
} as const;

/** A schema the grammar cannot express or that is out of bounds; `path` is where in the schema. */
export class SchemaError extends Error {
  constructor(
    readonly path: string,
    readonly detail: string,
    /** For a tool-call grammar: the index of the tool whose parameters are at fault. */
    readonly tool?: number,
  ) {
    super(`${path === "" ? "the schema" : `'${shorten(path)}'`}: ${detail}`);
    this.name = "SchemaError";
  }

  forTool(index: number): SchemaError {
    return new SchemaError(this.path, this.detail, index);
  }
}

/** A path deep in a schema is shown by its two ends: the message stays short whatever was sent. */
function shorten(path: string): string {
  return path.length <= 160 ? path : `${path.slice(0, 70)}…${path.slice(-70)}`;
}

/** What one grammar has spent of SCHEMA_LIMITS so far. */
export class Budget {
  private nodes = 0;
  private counts = 0;
  private enums = 0;
  private chars = 0;

  node(path: string): void {
    if (++this.nodes > SCHEMA_LIMITS.nodes)
      throw new SchemaError(path, `the schema has more than ${SCHEMA_LIMITS.nodes} subschemas and enum values.`);
  }

  count(value: number, path: string): void {
    this.counts += value;
    if (this.counts > SCHEMA_LIMITS.countTotal) {
      throw new SchemaError(path, `the lengths and item counts of the schema add up to more than ${SCHEMA_LIMITS.countTotal}.`);
    }
  }

  enumValues(count: number, path: string): void {
    this.enums += count;
    if (this.enums > SCHEMA_LIMITS.enumValues)
      throw new SchemaError(path, `the schema has more than ${SCHEMA_LIMITS.enumValues} enum values.`);
    for (let i = 0; i < count; i++) this.node(path);
  }

  literal(text: string, path: string): void {
    this.chars += text.length;
    if (this.chars > SCHEMA_LIMITS.literalChars) {
      throw new SchemaError(
        path,
        `the property names and enum and const values of the schema are longer than ${SCHEMA_LIMITS.literalChars} characters in all.`,
      );
    }
  }
}
