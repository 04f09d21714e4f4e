/** The `data:` payloads of a server-sent-events body, as they arrive; `[DONE]` ends the stream. */
export async function* sseData(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const data = buffer.slice("data: ".length, end);
      buffer = buffer.slice(end + 2);
      if (data === "[DONE]") return;
      yield data;
    }
  }
}
