/** What an embedding request gets back from the engine. */
export interface Embedded {
  /** Each input's unit vector, in input order. */
  vectors: Float32Array[];
  /**
   * Each vector as a JSON array of numbers, written on the runner thread (protocol/float32-json.ts),
   * when asked for; a request whose batch answered without it (never, today) has none.
   */
  json?: string[];
}
