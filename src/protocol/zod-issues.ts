import type { z } from "zod";

export type ZodIssue = z.ZodError["issues"][number];

/**
 * The problem a validation issue means, for naming its parameter. A union that refused a value in
 * every form names only itself ("Invalid input"). Where exactly one form takes a value of this type
 * (every other refused its type outright), that form's first problem is the one meant, and names
 * the field inside the value: `prediction.content[0].type` rather than `prediction.content`. A
 * problem at the union's own path keeps the union's wording.
 */
export function innermostIssue(issue: ZodIssue): ZodIssue {
  if (issue.code !== "invalid_union") return issue;
  const typed = issue.errors.filter((form) => !(form[0]?.code === "invalid_type" && form[0].path.length === 0));
  const first = typed.length === 1 ? typed[0]![0] : undefined;
  if (!first) return issue;
  const inner = innermostIssue(first);
  return inner.path.length > 0 ? { ...inner, path: [...issue.path, ...inner.path] } : issue;
}
