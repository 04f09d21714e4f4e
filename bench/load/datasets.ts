import { seededRandom } from "./stats.js";

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/**
 * `random`: independent prompts of about `inputTokens` tokens of random words, asking for
 * `outputTokens`. The words are common English ones, about one token each for the models here.
 */
const WORDS =
  "time year people way day man thing woman life child world school state family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word business issue side kind head house service friend father power hour game line end member law car city community name president team minute idea kid body information back parent face others level office door health person art war history party result change morning reason research girl guy moment air teacher force education".split(
    " ",
  );

export function randomPrompts(count: number, inputTokens: number, seed: number): ChatMessage[][] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => {
    const words = Array.from({ length: Math.max(1, inputTokens - 12) }, () => WORDS[Math.floor(random() * WORDS.length)]!);
    return [{ role: "user", content: `Continue this text at length: ${words.join(" ")}` }];
  });
}

/** `multiturn`: conversations whose turns each resend the whole history plus a new question. */
export const FOLLOW_UPS = [
  "Tell me about lighthouses.",
  "How were they lit before electricity?",
  "Who kept them running?",
  "What was a keeper's day like?",
  "Why are most of them automated now?",
  "Which one is the oldest still standing?",
  "What happens to old lighthouses today?",
  "Summarize what we discussed.",
];

export function conversationSystemPrompt(conversation: number): ChatMessage {
  return { role: "system", content: `You are a helpful guide. This is conversation ${conversation}. Answer in a few sentences.` };
}
