/**
 * A multipart/form-data body's parts as the services read them, in the order they arrive: a text
 * field, or a file whose bytes are read as they come (never held whole). The HTTP layer makes them.
 */
export type FormPart =
  | { field: string; value: string }
  /** `file`: the form field the file came in. */
  | { file: string; filename: string; bytes: AsyncIterable<Buffer> };
