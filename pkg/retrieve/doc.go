// Package retrieve is the retriever: the NATS micro service "agentmem-retriever"
// (discoverable with `nats micro list`, with per-endpoint stats) that answers
// memrpc.<tenant>.<endpoint> for every tenant (SPEC E3). Each endpoint subscribes to
// memrpc.*.<endpoint> in one queue group, so N replicas share the requests and each
// request is answered once; the tenant is read from the request subject. Endpoint
// names with dots are registered under micro names with "_" (session_summary) on
// their dotted subject.
//
// # Endpoints
//
//	endpoint             request                 reply                  served by
//	context              ContextRequest          ContextPack            this package (rules below)
//	search               SearchRequest           SearchReply            markdown here, the rest Memories.Search
//	append               AppendRequest           AppendReply            docstore AppendLongTerm / AppendToday (A9)
//	topic                TopicRequest            TopicReply             whitelisted topic file; missing = ""
//	add get update       mem0 requests           mem0 replies           Memories (C2)
//	delete reset history
//	consolidate          ConsolidateRequest      ConsolidateReply       Consolidator (503 when none)
//	session.summary      SessionRequest          SessionSummaryReply    session state + Deps.Summarize
//	session.clear        SessionRequest          DeleteReply            stream purge, state+turns, session items
//	session.archive      SessionRequest          SessionArchive         stream, turns, session items, summary
//	session.restore      SessionArchive          SessionRestoreReply    re-publish missing events; upsert the rest
//	item.save item.get   item requests           MemoryItem / replies   Memories (D4)
//	item.list item.update item.delete item.delete_scope item.search
//
// Errors are micro errors (headers Nats-Service-Error, Nats-Service-Error-Code):
// 400 for malformed JSON and requests that fail their Validate (the message is the
// validation error, naming the field and the rule), 404 for a missing memory, item
// or session, 503 for a dependency that is not there or not answering, 500 for the
// rest. A panic in a handler is recovered and answered with 500.
//
// # Context packs
//
//   - core: the first AutoLoadLines (200) lines of MEMORY.md (SPEC A2); without a
//     query, the whole file (A10). A missing or blank file gives no core.
//   - topics (A5), not in lightweight packs: file_patterns.md when a query term is a
//     file-structure word (file, table, sheet, spreadsheet, workbook, column, row,
//     csv, tsv, xlsx, xls, parquet, schema, field, header, dataset, dtype, structure,
//     record …), user_prefs.md when it is a preference word (format, style, chart,
//     plot, graph, prefer, preference, color, font, layout, output, theme, decimal,
//     favorite …). Terms are bm25.Tokenize terms, so plurals match.
//   - chunks (A10), not in lightweight packs: markdown.SearchChunks over MEMORY.md,
//     top retrieve_limit; none without a query. Ids are "MEMORY.md#L<start>-<end>".
//   - daily_notes: the notes of the last recent_days days, newest first.
//   - recent_events (B3, with a session_id): with session_relevant_history_limit > 0
//     and a query, the session's recent messages BM25 finds relevant, at most that
//     many, in conversation order; otherwise the last session_relevant_fallback_keep.
//     recent_turns: the session's last RecentTurns turns.
//   - episodic_items, semantic_items (C4), not in lightweight packs and not without
//     a query: Memories.Recall with k_episodic and k_semantic; each item's source
//     copies the record's metadata source_event_ids and source_meta, and its
//     session_ids are source_chat_ids (or the record's chat id).
//   - persona, user_profile, session_items: the memory items of those scopes, at
//     most ItemsLimit each.
//
// MEMORY.md and the topic files are kept between requests (DocCacheSize files, with
// MEMORY.md's chunk index) and checked per request with the docstore's
// ReadFileIfChanged, so an edit is in the next pack without a read per request.
//
// The policy (B1) is the configured one overlaid with the namespace's
// policy_overrides.json, read once per session and cached, so a change applies to
// new sessions (B5). The prompt renders, in order: Persona, User profile, Core
// memory, Topic: <name>, Relevant notes, Recent notes, Known facts, Episodic
// memories, Session items, Recent session. It is filled within max_tokens (the
// request's, or Config.MaxTokens) by priority: the core memory always, then memory
// items, the loaded topics, the ranked memories (facts and episodes by score, then
// chunks), the recent session, the daily notes; what does not fit is dropped from
// prompt and pack alike, and the pack's sections list each section's entries,
// dropped entries and tokens (see render). token_estimate is the prompt's
// characters / 4. After each pack with vector memories, one memory_hit
// event listing exactly their ids is published asynchronously (Nats-Msg-Id = event
// id) by one long-lived publisher goroutine, which Run's drain waits for; a failed
// publish is logged.
package retrieve
