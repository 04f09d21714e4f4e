import { getLlama, type Llama } from "node-llama-cpp";

/**
 * llama.cpp's own grammar parser and matcher (reached through node-llama-cpp), to check the GBNF
 * text we build against the code that will run it: the text parses, and a string is accepted only if
 * the grammar matches all of it and is then complete.
 */
export interface ParsedGrammar {
  accepts(text: string): boolean;
}

let llama: Promise<Llama> | undefined;

export async function parseGbnf(text: string): Promise<ParsedGrammar> {
  llama ??= getLlama({ gpu: false, build: "never", logLevel: "error" as never });
  const grammar = await (await llama).createGrammar({ grammar: text });
  // `_testText` feeds the text to llama_grammar_accept code point by code point (node-llama-cpp's own test hook).
  const matcher = grammar as unknown as { _testText(text: string): boolean };
  return { accepts: (candidate) => matcher._testText(candidate) };
}
