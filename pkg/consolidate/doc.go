// Package consolidate is the consolidator: it keeps each namespace's (tenant,
// user) episodic and semantic memory tidy (SPEC C4–C8, D4). A Runner does the work
// on one namespace and is safe to call from anywhere (the Worker's timer and
// events, the retriever's consolidate endpoint); a Worker drives it from the
// event stream. History and Sweeper are small interfaces so that the package
// does not depend on pkg/memory: wire (*memory.Service).Log() and the
// *memory.Service itself.
//
// # A consolidation run (Runner.Consolidate)
//
// Under the namespace lease, in order:
//
//  1. TTL sweep (D4): Sweeper.SweepExpired deletes the namespace's expired
//     memories (expired_swept). Idempotent: a memory is expired or gone.
//  2. Semantic writer (C8): the episodic memories whose time is after the
//     namespace's watermark minus SemanticLookback go to the SemanticWriter
//     together with every stored semantic memory as the known facts, so a known
//     fact is never written again; the new facts are upserted under
//     records.FactRecord's id, derived from the normalised fact, so even a
//     repeated or concurrent write stores one record (semantic_written). Each
//     fact carries the provenance (source_event_ids, source_meta) of the
//     episode it came from. The watermark (the latest episode time given to the
//     writer) only saves work: the lookback re-reads recent episodes so that an
//     observation ingested late is still seen, and re-reading is harmless.
//  3. Merge and separate (C6, C7): Executor.Consolidate (merged, separated).
//     Its plan is deterministic and its merges upsert an id derived from both
//     originals before deleting them, so a rerun converges and an interrupted
//     run is completed by the next one (see "The planner and the executor").
//  4. History: the merged record gets a "merge" change and both originals a
//     "merged_into" change; each separated record a "separate" change; each new
//     fact an "add". Only changes found in the store after the run are recorded.
//     History is an audit trail written after the change it describes: a crash
//     in between loses the entry (at most once), never duplicates it.
//  5. The namespace state (bucket StateBucket, key "<tenant>.<user>") records the
//     run's start time (what the Worker's timer compares writes against) and the
//     new watermark; it is written only when every step succeeded.
//
// # The planner and the executor (C5, C6, C7)
//
// Plan is pure: over the user's episodes it takes pairs greedily by descending
// cosine of their vectors (ties by ids), each record in at most one action. A
// pair with cosine ≥ 0.85 that passes the hard rules (HardRulesPass: same who;
// same chat within 30 minutes; different chats within 7 days) is merged; 0.65 ≤
// cosine < 0.85, or ≥ 0.85 failing the hard rules, is separated; below 0.65
// nothing happens. A pair whose records both list each other in
// separated_from_ids is not paired again, so repeated runs converge instead of
// rewriting the same pair forever.
//
// Executor.Consolidate carries a plan out. A merge upserts the merged record
// (MergedRecord: id DeterministicID("merge", smaller id, larger id), earliest
// time and its chat, summed hit counts, source_chat_ids and merged_from_ids the
// union of both records' own lists and their chats and ids) and only then deletes
// both originals. Crash safety: if the process stops between the two steps the
// store holds the merged record and both originals, and nothing is lost. Every
// run starts by deleting each record whose id is listed in another record's
// merged_from_ids, so the next run removes those originals before planning and
// the store ends as if the merge had completed; the same cleanup removes an
// original that a redelivered observation re-created after its merge. Rerunning a
// merge upserts the same id, so two concurrent runs cannot duplicate it. A
// separation patches each record with its rewritten text, a new vector, an
// update entry and the other's id in separated_from_ids; a run stopped between
// the two patches leaves the pair half-marked, and the next run separates it
// again.
//
// Executor.Reconsolidate (C5) rewrites episodes after use: new text and vector,
// an update entry {ts, context, previous_text}; time, chat_id and who are never
// in the patch, so they cannot change.
//
// # Hits (Runner.ApplyHits, C4, C5)
//
// A memory_hit event lists the memories one context pack used. ApplyHits takes
// one or more events of a namespace. Under the lease, each listed record gets, in
// one patch for all the events (so the record changes atomically or not at all;
// the patches of every record of the call go in one UpdatePayloads, one
// transaction in the embedded store): hit_count + 1 per event, each event id appended to metadata
// "hit_events" (the last 32 ids), and for an episodic memory one reconsolidation
// for the call (the newest new event's query as the new context), appending one
// entry {ts, context, previous_text} to "updates"; the new text is embedded, unless
// it equals the stored one. A burst of uses is one reconsolidation: one per use
// would store a copy of the whole previous text per context request. One call
// asks for at most RunnerConfig.MaxReconsolidations rewrites (16): the memories
// past it count their hits and are shed (reconsolidations_total{outcome="shed"}),
// keeping their text and marks, so a later use reconsolidates them; a hot
// namespace's batch would otherwise ask a slow model for more rewrites than its
// handler's deadline holds, fail whole and never drain. Its history
// entries ("hit" per event, without the unchanged text; one "reconsolidate" with
// the new text and the previous one) go in one append. Time, chat_id and who are never in the
// patch. A record whose "hit_events" already holds the event id is skipped, so a
// redelivered event changes nothing. Ids that are not stored (deleted, merged,
// expired) or are not memory ids are skipped and logged. The dedupe window is 32
// events per memory: a duplicate arriving after 32 newer hits of the same memory
// would count again.
//
// # The namespace lease
//
// One run (or hit application) per namespace at a time, across every replica.
// The lease is a key "<tenant>.<user>" in the JetStream KV bucket LeaseBucket,
// whose TTL (the stream's MaxAge) is LeaseTTL:
//
//   - acquire: Create the key (value: owner, times). Create succeeds only when
//     the key is absent, deleted, or aged out, so exactly one owner wins; every
//     other caller gets ErrLeaseHeld at once and retries later.
//   - renew: every LeaseTTL/3 the holder Updates the key with the revision it
//     last wrote. Each write is a new message, so its age restarts: a held lease
//     never expires. A revision mismatch or a missing key means the lease was
//     lost; so does failing to renew for a whole LeaseTTL. The run's context is
//     then cancelled with ErrLeaseLost and the run stops at its next store call.
//   - release: Delete with the last revision (a lease taken over meanwhile is not
//     deleted).
//   - crash: a holder that dies stops renewing; its key ages out after LeaseTTL
//     and the next Create succeeds.
//
// Why bucket TTL and not per-key TTL: jetstream.KeyTTL needs a bucket with
// LimitMarkerTTL (nats-server 2.11+) and applies only to Create, while nats.go's
// Update writes the new revision without a TTL, so a renewed per-key lease would
// never expire again. With the bucket TTL every revision ages out on its own and
// any JetStream server works. LeaseTTL is therefore a property of the bucket:
// every process must use the same value (the last one to start sets it).
//
// Failure modes: the lease is not a fence. A holder paused for longer than
// LeaseTTL (GC, a stopped VM) may still finish a store call after another owner
// took over; this is safe because every step is idempotent (deterministic ids,
// per-event hit dedupe) and the executor converges, so the worst outcome of an
// overlap is repeated work or one lost "updates" entry, never a duplicate
// memory. A NATS outage longer than LeaseTTL aborts the run with ErrLeaseLost;
// the next run resumes it. Releasing may fail (the delete is logged); the lease
// then expires after LeaseTTL.
//
// # The Worker
//
// The consolidator's durable consumer (bus.WorkerConsumer(bus.WorkerConsolidator))
// runs through pkg/pipeline:
//
//   - memory_hit: Runner.ApplyHits, in batches: the hits of a namespace
//     handled together (WorkerConfig.Concurrency in flight, the first waiting
//     HitLinger for others) are applied in one call, and each event is acked
//     once its batch is stored;
//   - memory_written: the namespace is marked dirty in bucket NamespacesBucket
//     (key "<tenant>.<user>", value the time the event was handled; the time of
//     receipt is after the write, so a run started later has seen it). The value
//     only grows (compare-and-set), so replicas never move it back;
//   - consolidate_requested: Runner.Consolidate now (at most WorkerConfig.MaxRuns
//     at once per replica);
//   - every Interval: Runner.Consolidate for each namespace whose last write is
//     newer than its last run's start; failures are logged and retried on the
//     next pass, since the namespace stays dirty.
//
// A handler that finds the lease held polls for it for up to LeaseWait; only then
// does the attempt fail and go through the Router's retries, so lease contention
// in normal operation (a run takes seconds) never exhausts them into a dead
// letter.
package consolidate
