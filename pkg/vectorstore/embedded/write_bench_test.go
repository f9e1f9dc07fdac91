package embedded_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// BenchmarkEmbeddedUpsertBatch upserts batches of 64 new records of 100 users, as
// the ingest worker stores a batch of episodes (time-ordered ids, a context with a
// deadline); ns/op is per record, and so is
// cpu-ns/record (reportPerRecord), background checkpoints included.
func BenchmarkEmbeddedUpsertBatch(b *testing.B) {
	s, _ := openBenchStore(b)
	// Cancellable, as a worker's is (the message's deadline).
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	texts, vecs := embeddedSentences(4, 24)
	const batch = 64
	recs := make([]vectorstore.Record, 0, batch)
	n := 0
	cpu := bustest.ProcessCPU(b)
	for b.Loop() {
		recs = append(recs, vectorstore.Record{
			ID: vectorstore.TimeOrderedID(time.Unix(int64(n), 0), "batch", fmt.Sprint(n)), Tenant: "acme", UserID: fmt.Sprintf("u%d", n%100),
			MemoryType: vectorstore.Episodic, Text: texts[n%len(texts)], Vector: vecs[n%len(vecs)], TS: time.Unix(int64(n), 0),
			ChatID: fmt.Sprintf("s-%05d", n/20), Metadata: map[string]any{"source_event_ids": []any{fmt.Sprint(n)}, "context": texts[(n+1)%len(texts)]},
		})
		n++
		if len(recs) == batch {
			if err := s.Upsert(ctx, recs...); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	reportPerRecord(b, cpu, b.N)
}

// BenchmarkUpsertLargeStore writes batches of 128 new records (time-ordered ids,
// each of another of 1,000 users, as ingest's batches are) into a store already
// holding $AGENTMEM_BENCH_PREFILL records (default 200,000) of those users, with
// the write connection's page cache at SQLite's default (2 MiB),
// DefaultWriteCacheMiB and 64 MiB. ns/op is per record; cpu-ns/record counts the process's
// user and system time, background checkpoints included; prefill-s is the time
// the prefill took, in batches of 1,000 (as agentmem bench loads its memories).
func BenchmarkUpsertLargeStore(b *testing.B) {
	prefill := embedded.BenchEnvInt(b, "AGENTMEM_BENCH_PREFILL", 200_000)
	for _, mib := range []int{2, embedded.DefaultWriteCacheMiB, 64} {
		b.Run(fmt.Sprintf("cache=%dMiB", mib), func(b *testing.B) {
			s, err := embedded.New(embedded.Config{Path: filepath.Join(b.TempDir(), "bench.db"), Dimensions: benchDims, WriteCacheMiB: mib}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			texts, vecs := embeddedSentences(5, 24)
			rec := func(n int, id string) vectorstore.Record {
				return vectorstore.Record{
					ID: id, Tenant: "acme", UserID: fmt.Sprintf("u%d", n%benchUsers),
					MemoryType: vectorstore.Episodic, Text: texts[n%len(texts)], Vector: vecs[n%len(vecs)], TS: time.Unix(int64(n), 0),
					Metadata: map[string]any{"source_event_ids": []any{fmt.Sprint(n)}, "context": texts[(n+1)%len(texts)]},
				}
			}
			start := time.Now()
			batch := make([]vectorstore.Record, 0, 1000)
			for n := range prefill {
				batch = append(batch, rec(n, vectorstore.DeterministicID("prefill", fmt.Sprint(n))))
				if len(batch) == cap(batch) || n == prefill-1 {
					if err := s.Upsert(ctx, batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := s.Checkpoint(ctx); err != nil {
				b.Fatal(err)
			}
			prefillTime := time.Since(start)
			cpu := bustest.ProcessCPU(b)
			n := prefill
			b.ResetTimer()
			for b.Loop() {
				batch = append(batch, rec(n, vectorstore.TimeOrderedID(time.Unix(int64(n), 0), "large", fmt.Sprint(n))))
				n++
				if len(batch) == 128 {
					if err := s.Upsert(ctx, batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			reportPerRecord(b, cpu, b.N)
			b.ReportMetric(prefillTime.Seconds(), "prefill-s")
		})
	}
}
