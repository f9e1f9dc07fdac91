// Package embedded is the one-machine vectorstore.Store: records in SQLite
// (modernc.org/sqlite, pure Go, WAL) as the durable copy, every read served from
// the (tenant, user) partitions it keeps in memory, dense scoring (exact, or an
// HNSW graph per memory type in a large partition) and BM25
// over pkg/bm25, background WAL checkpoints, and its own JSON codec for record
// metadata. Store documents the design; it runs vectorstoretest.RunSuite like
// every backend.
package embedded
