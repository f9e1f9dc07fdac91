package embedded_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// BenchmarkPartitionHeap measures what the loaded partitions cost the garbage
// collector: 100,000 records over 1,000 users with the metadata the pipeline
// writes (episode fields, update and provenance lists, nested meta objects), every
// partition loaded. It reports the live heap and heap objects per record and
// gc-ms, the median wall time of a forced collection: the mark work every GC
// cycle of a serving process repeats over this heap. The timed loop is a Get of
// three records, which decodes their metadata.
func BenchmarkPartitionHeap(b *testing.B) {
	s, err := embedded.New(embedded.Config{Path: filepath.Join(b.TempDir(), "heap.db"), Dimensions: benchDims}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	gen := newBenchText(4)
	rng := rand.New(rand.NewPCG(4, 4))
	const batch = 1000
	var ids []string
	for start := 0; start < benchRecords; start += batch {
		recs := make([]vectorstore.Record, batch)
		for i := range recs {
			n := start + i
			vec := make([]float32, benchDims)
			for j := range vec {
				vec[j] = rng.Float32() - 0.5
			}
			text, chat := gen.sentence(12), fmt.Sprintf("chat-%d", n/benchUsers/5)
			ts := time.Unix(int64(n), 0).UTC()
			recs[i] = vectorstore.Record{
				ID: vectorstore.DeterministicID("heap", fmt.Sprint(n)), Tenant: "acme", UserID: fmt.Sprintf("u%d", n%benchUsers),
				MemoryType: vectorstore.Episodic, Text: text, Vector: vec, TS: ts, ChatID: chat, Who: "user",
				Metadata: map[string]any{
					"context": "user said in " + chat, "thing": text, "time": ts.Format(time.RFC3339Nano), "chat_id": chat, "who": "user",
					"updates": []any{}, "source_chat_ids": []any{chat}, "merged_from_ids": []any{},
					"source_event_ids": []any{fmt.Sprintf("load-%08d", n)},
					"source_meta":      []any{map[string]any{"dia_id": fmt.Sprintf("D%d:%d", n/5+1, n%5+1)}},
				},
			}
			if n%benchUsers == 1 {
				ids = append(ids, recs[i].ID)
			}
		}
		if err := s.Upsert(ctx, recs...); err != nil {
			b.Fatal(err)
		}
	}
	before, after := loadEveryPartition(b, s)
	gcs := make([]time.Duration, 5)
	for i := range gcs {
		start := time.Now()
		runtime.GC()
		gcs[i] = time.Since(start)
	}
	slices.Sort(gcs)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		recs, err := s.Get(ctx, "acme", "u1", ids[:3]...)
		if err != nil || len(recs) != 3 || recs[0].Metadata["who"] != "user" {
			b.Fatalf("get: %d records, %v", len(recs), err)
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchRecords, "B/record")
	b.ReportMetric(float64(after.HeapObjects-before.HeapObjects)/benchRecords, "objects/record")
	b.ReportMetric(float64(gcs[len(gcs)/2].Microseconds())/1000, "gc-ms")
}
