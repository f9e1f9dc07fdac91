// Package memory is the memory service over the vector store: the mem0-style API
// (SPEC C2), keyed memory items (D4), the recall-and-re-rank primitive shared
// with the retriever's context packs, and the history log shared with the
// consolidator. It is a plain Go API; the retriever serves it over NATS
// (memrpc.<tenant>.add, get, search, ...), mapping ErrInvalid (which request
// validation errors also wrap together with events.ErrInvalidRequest) to 400,
// ErrNotFound to 404 and anything else to 500.
//
// # API
//
// Every call is scoped by (tenant, user): the tenant comes from the subject, the
// user from the request, and no call sees another user's records.
//
//   - Add writes an episodic (default) or semantic memory. Episodic records carry
//     the C1 metadata (context, thing, time, chatid, who, updates, source_chat_ids,
//     merged_from_ids; built by records.EpisodeRecord), semantic ones fact,
//     source_chatid, first_seen (records.FactRecord). The caller's metadata is
//     merged in and returned unchanged; keys the service derives from the record
//     (thing, time, fact, ...) are refused rather than silently overwritten. An
//     added memory is written as asked, its credentials masked (pkg/redact, as
//     in Update and the items' content): the write decision (C3) is ingest's,
//     for observations.
//   - Get, Update, Delete work on episodic and semantic memories by id. Update
//     re-embeds a changed text, keeps the metadata copy of the text (thing or
//     fact) in step, and appends an update entry {ts, context, previous_text} to an
//     episodic memory's updates, as reconsolidation does (C5); time, chat and
//     speaker never change. Delete skips unknown ids, so a retry succeeds.
//   - Search and Recall: see Ranking. Search ignores the markdown type, which the
//     retriever serves from the Markdown memory.
//   - Reset deletes every record of the user, items included, and the user's
//     history, and returns the record count.
//   - History lists a memory's changes; HistoryLog (Service.Log) is the same log
//     for the consolidator's merge, separate and reconsolidate changes.
//   - SaveItem, GetItem, ListItems, UpdateItem, DeleteItem, DeleteScope,
//     SearchItems and SweepExpired are the memory items of D4: records of type
//     item whose content is embedded, addressed by (scope, kind, key) and, for
//     scope session, the session (kept in the record's chat id).
//
// The service's clock (Deps.Now) decides expiry: reads ask the store for expired
// records too and drop those expired at Now, so an expired item is never
// returned by any call, and a test can move time. In production Now is the wall
// clock and agrees with the store's own expiry.
//
// # Ranking
//
// Recall embeds the query once and runs, per memory type, a keyword (BM25) and a
// dense search, taking 2k candidates for a type limited to k, and scores each
// candidate (RankConfig.Fusion FusionKeyword, the default):
//
//	fused     = BM25 / best BM25 + DenseWeight·max(0, cos − DenseFloor) / (best cos − DenseFloor)
//	relevance = fused / best fused                 in [0, 1]
//	score     = relevance × (1 + RecencyWeight·2^(−age/RecencyHalfLife)
//	                           + HitWeight·ln(1 + hit_count))
//
// with DenseWeight 0.5 and DenseFloor 0.2; the types are then put on one scale by
// their best BM25 (onOneScale). With FusionRRF the store's hybrid search fuses
// both rankings by reciprocal rank instead, relevance = hybrid score / (2/61).
// A lexical embedder (Mode sparse) ranks by BM25 alone, the dense side only
// filling the candidates no keyword reached.
//
// with defaults RecencyHalfLife 30 days, RecencyWeight 0.15, HitWeight 0.05.
// Two rules then re-rank a type's candidates: a memory whose speaker
// (Record.Who) the query names gains SpeakerWeight (0.6), and, picking greedily,
// a memory loses RedundancyPenalty (0.7) × the largest share of its lines that an
// already picked memory has (an episode repeats the messages said before it, so
// neighbouring episodes are near copies). With Rerank on, each candidate then
// gains Weight (1.5) × the cosine of its sentence vector with the query's × the
// best candidate's score (RerankConfig). It keeps each type's best k and returns
// them merged, best first, ties by id. With Expansion on, the keyword side
// also searches the user's words that mean nearly what a query word means
// (ExpansionConfig, Expand), each at a fraction of a query word's weight.
//
// Why this shape: relevance stays the dominant, multiplicative term, so an
// irrelevant memory never rises on recency or use alone (relevance 0 scores 0).
// The keyword side leads because a word the query shares with a memory is the
// most precise evidence there is; the dense side brings in what shares no word
// ("hobbies" / "I paint") at up to half the weight of the best keyword match.
// Measured on LoCoMo with a sentence encoder, reciprocal rank fusion (both
// sides' first places equal) cost single-hop questions 4.6 points of recall@10
// and the keyword-led fusion none, while both lifted the categories keywords
// miss (BENCHMARKS.md). The bonuses are bounded and small: a memory written now
// gains 15%, one used 100 times about 23%, enough to reorder memories of nearly
// equal relevance but not to lift a poor match over a good one. Recency decays
// exponentially, so a fresh memory beats an old one of equal relevance and the
// bonus of old memories fades to nothing; hits count logarithmically, so the
// first uses matter and a heavily used memory cannot run away with every query.
// The score only grows with relevance, recency and hit count. One search per
// type gives each type its own limit and candidates; a single search over both
// types was measured to cost about the same (the store's per-record hydration
// dominates) and can crowd a type out.
//
// # Identifiers
//
// Record ids are UUIDv5 (vectorstore.DeterministicID), derived from the input so
// that a retry upserts instead of duplicating (episodes from observations carry
// time-ordered ids, vectorstore.TimeOrderedID, of their event):
//
//   - episodic add: ("add", tenant, user, "episodic", chat, text); adding the same
//     text in the same chat again finds the memory and changes nothing;
//   - semantic add: records.FactRecord's id of the normalised fact, the one the
//     semantic writer uses, so a fact is one record however and from whichever
//     chat it arrives (C8);
//   - item: ItemID = ("item", tenant, user, scope, kind, key, session), so saving
//     a key again replaces the item (created_ts kept, updated_ts now).
//
// # History
//
// The history log is an append-only JetStream stream (Config.HistoryStream,
// default "AGENTMEM_HISTORY", file storage) laid out the way NATS KV is: one
// subject per memory, "memhist.<tenant>.<user>.<memory id>" with the id in
// canonical UUID form, and one message per Append holding the JSON list of that
// call's changes. An append is a publish acknowledged by the stream: it reads
// nothing and rewrites nothing, so its cost does not grow with the history, a
// call's changes are stored together or not at all, and concurrent writers (this
// service, consolidator replicas) cannot lose each other's changes. The stream
// keeps MaxHistory messages per subject, discarding the oldest; List reads them
// in order and returns the newest MaxHistory changes. Reset purges the subjects
// "memhist.<tenant>.<user>.>".
//
// The history used to be one KV key per memory in the bucket "agentmem_history",
// whose value was the whole change list, rewritten by every append. Nothing was
// released with that layout, so it is not migrated; an existing bucket is left
// as it is and can be deleted by hand (nats kv del agentmem_history).
package memory
