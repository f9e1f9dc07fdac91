package consolidate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// countingStore is the real store, counting the calls that write records.
type countingStore struct {
	vectorstore.Store
	writes atomic.Int64
}

func (s *countingStore) Upsert(ctx context.Context, recs ...vectorstore.Record) error {
	s.writes.Add(1)
	return s.Store.Upsert(ctx, recs...)
}

func (s *countingStore) UpdatePayload(ctx context.Context, tenant, userID, id string, patch vectorstore.Patch) error {
	s.writes.Add(1)
	return s.Store.UpdatePayload(ctx, tenant, userID, id, patch)
}

func (s *countingStore) UpdatePayloads(ctx context.Context, tenant, userID string, patches map[string]vectorstore.Patch) ([]string, error) {
	s.writes.Add(1)
	return s.Store.UpdatePayloads(ctx, tenant, userID, patches)
}

// hitRig is a user with memories (half episodic, half semantic) and a Runner
// whose store counts its writes; pack gives the memory ids of the n-th context
// pack (10 of them, as the retriever's default 5 + 5).
type hitRig struct {
	e     *testEnv
	store *countingStore
	r     *consolidate.Runner
	ids   []string
}

func newHitRig(b *testing.B, memories int) *hitRig {
	e := newEnv(b)
	h := &hitRig{e: e, store: &countingStore{Store: e.store}}
	h.r = e.runner(b, "", func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { d.Vectors = h.store })
	for i := range memories {
		text := fmt.Sprintf("My sales files of region %d have columns date, product and qty", i)
		rec := e.episode(b, user, fmt.Sprintf("c%d", i), base.Add(time.Duration(i)*time.Minute), text)
		if i%2 == 1 {
			rec.ID = vectorstore.DeterministicID("fact", text)
			rec.MemoryType = vectorstore.Semantic
			if err := e.store.Upsert(testCtx(b), rec); err != nil {
				b.Fatal(err)
			}
		}
		h.ids = append(h.ids, rec.ID)
	}
	return h
}

func (h *hitRig) hit(n int) events.Envelope {
	pack := make([]string, 10)
	for j := range pack {
		pack[j] = h.ids[(n*3+j*5)%len(h.ids)]
	}
	return hitEvent(user, fmt.Sprintf("which columns does file %d have?", n), pack...)
}

// BenchmarkApplyHits applies one batch of 20 memory_hit events per op (40
// memories) through the real Runner: embedded NATS for the lease and history,
// the embedded vector store. It reports the process CPU (nats-server included)
// and the store write calls per batch. Episodic memories collect one updates
// entry per batch and histories fill up to their cap, so compare runs of the same
// -benchtime=Nx.
func BenchmarkApplyHits(b *testing.B) {
	h := newHitRig(b, 40)
	ctx := testCtx(b)
	batch := make([]events.Envelope, 20)
	n := 0
	h.store.writes.Store(0)
	cpuBefore := bustest.ProcessCPU(b)
	for b.Loop() {
		for i := range batch {
			batch[i] = h.hit(n)
			n++
		}
		if err := h.r.ApplyHits(ctx, tenant, user, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((bustest.ProcessCPU(b)-cpuBefore).Microseconds())/float64(b.N), "cpu-µs/batch")
	b.ReportMetric(float64(h.store.writes.Load())/float64(b.N), "writes/batch")
}

// BenchmarkWorkerHitBurst publishes a burst of 1,000 memory_hit events for one
// user (100 memories), as 1,000 context requests do, and times the Worker, with
// its default configuration, until every event is acknowledged. It reports the
// process CPU and the store writes per 1,000 hits: both follow the number of
// batches the burst is applied in.
func BenchmarkWorkerHitBurst(b *testing.B) {
	const burst = 1000
	h := newHitRig(b, 100)
	h.e.startWorker(b, h.r, consolidate.WorkerConfig{})
	ctx := testCtx(b)
	n := 0
	h.store.writes.Store(0)
	cpuBefore := bustest.ProcessCPU(b)
	for b.Loop() {
		for range burst {
			publish(b, h.e.js, h.hit(n))
			n++
		}
		bustest.Eventually(b, time.Minute, func() error { return h.e.consumed(ctx) })
	}
	b.ReportMetric(float64((bustest.ProcessCPU(b)-cpuBefore).Milliseconds())/float64(b.N), "cpu-ms/burst")
	b.ReportMetric(float64(h.store.writes.Load())/float64(b.N), "writes/burst")
}
