/**
 * "View code": the same request as curl, Python openai and JS openai. The key is never written
 * into the snippet; it reads SWITCHYARD_API_KEY from the environment.
 */
export type Language = "curl" | "python" | "javascript";

export function snippet(language: Language, origin: string, body: Record<string, unknown>): string {
  const { model, messages, stream, stream_options, ...rest } = body;
  switch (language) {
    case "curl":
      return [
        `curl ${origin}/v1/compat/chat/completions \\`,
        `  -H "Authorization: Bearer $SWITCHYARD_API_KEY" \\`,
        `  -H "Content-Type: application/json" \\`,
        `  -d '${JSON.stringify(body, null, 2).replace(/'/g, "'\\''")}'`,
      ].join("\n");
    case "python":
      return [
        "import os",
        "from openai import OpenAI",
        "",
        `client = OpenAI(api_key=os.environ["SWITCHYARD_API_KEY"], base_url="${origin}/v1/compat")`,
        "",
        "completion = client.chat.completions.create(",
        ...pythonArgs({ model, messages, ...rest }, stream ? { stream, stream_options } : {}),
        ")",
        ...(stream
          ? ["for chunk in completion:", "    if chunk.choices:", '        print(chunk.choices[0].delta.content or "", end="")']
          : ["print(completion.choices[0].message.content)"]),
      ].join("\n");
    case "javascript":
      return [
        'import OpenAI from "openai";',
        "",
        `const client = new OpenAI({ apiKey: process.env.SWITCHYARD_API_KEY, baseURL: "${origin}/v1/compat" });`,
        "",
        `const completion = await client.chat.completions.create(${indent(JSON.stringify(body, null, 2))});`,
        ...(stream
          ? ['for await (const chunk of completion) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");']
          : ["console.log(completion.choices[0].message.content);"]),
      ].join("\n");
  }
}

/** Keyword arguments; parameters the Python client has no keyword for go in extra_body. */
function pythonArgs(known: Record<string, unknown>, streaming: Record<string, unknown>): string[] {
  const lines: string[] = [];
  for (const [name, value] of Object.entries({ ...known, ...streaming })) {
    if (value === undefined) continue;
    lines.push(`    ${name}=${indent(python(value), "    ")},`);
  }
  return lines;
}

/** JSON is nearly Python: only the literals differ. */
function python(value: unknown): string {
  return JSON.stringify(value, null, 2)
    .replace(/(?<=[:[,\s])true(?=[,\s\]}]|$)/g, "True")
    .replace(/(?<=[:[,\s])false(?=[,\s\]}]|$)/g, "False")
    .replace(/(?<=[:[,\s])null(?=[,\s\]}]|$)/g, "None")
    .replace(/^true$/, "True")
    .replace(/^false$/, "False");
}

function indent(text: string, prefix = ""): string {
  return text.split("\n").join(`\n${prefix}`);
}
