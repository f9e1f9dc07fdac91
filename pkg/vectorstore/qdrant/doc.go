// Package qdrant is the Qdrant backend of vectorstore.Store, over Qdrant's gRPC API
// (github.com/qdrant/go-client). It is the vector store of the distributed mode
// (SPEC E4); the embedded store is the one-machine backend. Both run the same
// conformance suite, vectorstoretest.RunSuite.
//
// # Collection layout
//
// One collection (Config.Collection, default "memories") holds every tenant's
// records. A point has two named vectors:
//
//   - "dense": Config.Dimensions floats, Cosine distance. Qdrant normalises vectors
//     on write, so a record's Vector comes back with unit length (same direction).
//   - "bm25": embed.Sparse(Text), a sparse vector with modifier IDF: the vectors
//     carry BM25-saturated term frequencies and Qdrant applies the IDF of the whole
//     collection at query time (across partitions: sparse scores within one
//     partition shift as others grow, though no other partition's record is ever
//     returned).
//
// Payload indexes: keyword on tenant and user_id (both is_tenant, so storage and the
// dense index are organised per partition), memory_type, chat_id, who, scope, kind
// and key; integer with range on ts and expires_at. New creates a missing collection
// and any missing index (unless Config.SkipCreate), and refuses a collection whose
// dense vector has another size (vectorstore.ErrDimension) or that lacks either
// named vector (ErrIncompatible). Qdrant 1.16 or later is required (MinServerVersion).
//
// # Mapping
//
// Point id = the record's UUID. Payload: tenant, user_id, memory_type, scope, kind,
// key, text, chat_id, who (strings); ts (integer Unix microseconds, the precision the
// store keeps, compared exactly by integer ranges); hit_count (integer); confidence
// (double); expires_at (integer Unix microseconds, or null for never, so an update
// can clear it); metadata (a nested JSON object, null for a nil map, so any extra
// field comes back unchanged; numbers come back as float64 as encoding/json gives
// them).
//
// Filters become must conditions: tenant and user_id keyword matches first (every
// request carries them), memory types as one match-any, ids as has_id, Since/Until as
// one integer range on ts, chat_id/who/scope/kind/key as keyword matches, payload
// equality as a match on "metadata.<key>" (keyword, bool or integer), and, unless
// IncludeExpired, a nested should of "expires_at is empty" or "expires_at > now";
// ExpiredOnly is "expires_at <= now". One difference from the embedded store: Qdrant
// matches a payload condition against any element of an array value, so
// {"tags": ["a"]} matches tags = "a"; the embedded store matches scalars only.
//
// # Requests
//
//   - Search is one Query call. Dense and Sparse query "dense" or "bm25" with the
//     filter; Hybrid sends two prefetches (dense and sparse, each with the filter and
//     Limit×4 deep) fused by RRF with k = 61, which is Qdrant's 1/(k + 0-based
//     position) made equal to the package's 1/(60 + rank). A query text without index
//     terms sends no sparse side.
//   - Get and the read of UpdatePayloads are filtered scrolls, so the partition and
//     expiry are enforced by the server; Scroll pages in point id order, which for
//     UUIDs is the canonical string order.
//   - Upsert first reads the ids' owners and fails with ErrConflict, writing
//     nothing, if any belongs to another partition; the write is then one
//     UpdateBatch with an upsert per partition conditioned on that partition
//     (update_filter), so a concurrent creator of the same id in another partition
//     is never overwritten.
//   - UpdatePayloads (and UpdatePayload, a batch of one) reads every patched
//     record in one scroll, validates every patch, then writes only the changed
//     payload fields (a SetPayload per record, selected by partition + id) and
//     vectors (one UpdateVectors with the partition as update_filter) in one
//     UpdateBatch. It is not atomic: Qdrant applies the operations in order, so a
//     failure part way leaves the earlier ones applied. Nor across concurrent writers:
//     racing HitCountDelta updates can lose an increment, as Qdrant has no
//     server-side increment; agentmem serialises hit updates per namespace in the
//     consolidator.
//   - Delete and DeleteByFilter count exactly, then delete by a filter that always
//     includes tenant, user_id (and has_id for Delete), never by bare ids; the count
//     is exact only without concurrent writers in the partition.
//   - Every write waits for the operation to be applied (wait = true). Errors name
//     the endpoint and collection; the API key is sent as the "api-key" header and
//     redacted from error text.
//
// # What is verified how
//
// No Qdrant can run on the development machines. TestConformance runs the full
// vectorstoretest suite against a real server when AGENTMEM_TEST_QDRANT_ADDR is set
// (host:port of the gRPC API; AGENTMEM_TEST_QDRANT_API_KEY if the server needs one),
// each test in a fresh, randomly named collection dropped afterwards; without it the
// test is skipped, loudly. The tests that always run only check request shapes and
// response mapping against an in-process gRPC server (bufconn) that records what the
// adapter sends: the collection and index creation, the point shape, the hybrid
// query, the partition filter on deletes and updates, the API key header. They are
// stand-ins for a server that cannot run here and do not replace the conformance
// run: in particular RRF scores, IDF weighting, scroll order, update_filter and
// payload-filter semantics are Qdrant's behaviour, checked only by TestConformance.
package qdrant
