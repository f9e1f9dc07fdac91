package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// BenchmarkEmbeddedUpsertBatch upserts batches of 64 new records of 100 users, as
// the ingest worker stores a batch of episodes (time-ordered ids, a context with a
// deadline); ns/op is per record, and so is
// cpu-ns/record (reportPerRecord), background checkpoints included.
func BenchmarkEmbeddedUpsertBatch(b *testing.B) {
	s, emb := openBenchStore(b)
	gen := newBenchText(4)
	// Cancellable, as a worker's is (the message's deadline).
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	texts := make([]string, 512)
	for i := range texts {
		texts[i] = gen.sentence(24)
	}
	vecs, _ := emb.Embed(ctx, texts)
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
