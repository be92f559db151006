// Package assembler fits what goes into an LLM call into its token budget, exactly.
//
// It has two entry points. [New] and [Assembler.Assemble] are Weave's chunk assembler (its Context Assembler's API): retrieved chunks
// in score order, skipped when they do not fit, joined into one context string whose TotalTokens is the
// exact count of the whole string, separators and template text included. [AssembleRequest] is the region
// assembler: instructions, tools, user memory, knowledge, conversation history, tool outputs and the
// current message, fitted to a budget by a [Policy], rendered for OpenAI, Anthropic or as one text, with
// citations, a stable-prefix hash and a [Report] of every item kept or dropped. [Builder] gives it the
// shape of Phronomy's Context::Assembler.
//
// Counts are in the model's encoding (cl100k_base by default for the chunk assembler); they are exact
// wherever the model's tokenizer is public, and never exceed the budget.
package assembler
