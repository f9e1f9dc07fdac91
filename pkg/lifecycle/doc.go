// Package lifecycle is the life of the Markdown memory after it is written (SPEC
// B2, B4, B5): session summaries, long-term compression of MEMORY.md with its loss
// guard, and policy evolution by reflection. Each step has a model implementation
// (pkg/llm, prompts embedded from prompts/) and a deterministic offline one; a
// model that is unavailable or answers unusably falls back to the offline one,
// logged.
//
// The package holds the decisions; the workers run them: ingest publishes
// summary_due, the extractor summarises and reflects, the consolidator compresses
// after Markdown writes, the retriever compresses on demand and serves the
// policy endpoints.
package lifecycle
