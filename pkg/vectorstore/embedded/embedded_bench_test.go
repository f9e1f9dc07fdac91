package embedded_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

const (
	benchRecords = 100_000
	benchUsers   = 1_000
	benchDims    = 384
)

// benchText is a memory-like sentence: Zipf-distributed words from a 3,000-word
// vocabulary, so common words have long posting lists, as in real text.
type benchText struct {
	zipf *rand.Zipf
}

func newBenchText(seed uint64) benchText {
	r := rand.New(rand.NewPCG(seed, 1))
	return benchText{zipf: rand.NewZipf(r, 1.1, 1, 2999)}
}

// embeddedSentences returns 512 sentences of words words from seed and their
// vectors by the offline embedder.
func embeddedSentences(seed uint64, words int) ([]string, [][]float32) {
	gen := newBenchText(seed)
	texts := make([]string, 512)
	for i := range texts {
		texts[i] = gen.sentence(words)
	}
	emb, _ := embed.NewLocal(embed.LocalConfig{Dimensions: benchDims})
	vecs, _ := emb.Embed(context.Background(), texts)
	return texts, vecs
}

func (b benchText) sentence(words int) string {
	w := make([]string, words)
	for i := range w {
		w[i] = fmt.Sprintf("word%d", b.zipf.Uint64())
	}
	return strings.Join(w, " ")
}

// benchStore fills a store with benchRecords records, benchRecords/benchUsers per
// user, embedded with the local embedder.
func benchStore(b *testing.B) *embedded.Store {
	b.Helper()
	s, emb := openBenchStore(b)
	gen := newBenchText(1)
	ctx := context.Background()
	const batch = 1000
	texts := make([]string, batch)
	for start := 0; start < benchRecords; start += batch {
		for i := range texts {
			texts[i] = gen.sentence(12)
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			b.Fatal(err)
		}
		recs := make([]vectorstore.Record, batch)
		for i := range recs {
			n := start + i
			recs[i] = vectorstore.Record{
				ID: vectorstore.DeterministicID("bench", fmt.Sprint(n)), Tenant: "acme", UserID: fmt.Sprintf("u%d", n%benchUsers),
				MemoryType: []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic}[n%2],
				Text:       texts[i], Vector: vecs[i], TS: time.Unix(int64(n), 0), ChatID: fmt.Sprintf("c%d", n%7),
				Metadata: map[string]any{"context": texts[i], "updates": []any{}},
			}
		}
		if err := s.Upsert(ctx, recs...); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkEmbeddedSearch is the retriever's query: a hybrid search (limit 10, both
// memory types) in one user's partition of a store holding 100,000 records of 1,000
// users, partitions warm. p99-ns is the 99th percentile of the timed searches.
func BenchmarkEmbeddedSearch(b *testing.B) {
	s := benchStore(b)
	emb, _ := embed.NewLocal(embed.LocalConfig{Dimensions: benchDims})
	gen := newBenchText(2)
	ctx := context.Background()
	const nq = 256
	queries := make([]vectorstore.Query, nq)
	for i := range queries {
		text := gen.sentence(6)
		vecs, _ := emb.Embed(ctx, []string{text})
		queries[i] = vectorstore.Query{
			Filter: vectorstore.Filter{Tenant: "acme", UserID: fmt.Sprintf("u%d", (i*37)%benchUsers),
				MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic}},
			Vector: vecs[0], Text: text, Mode: vectorstore.Hybrid, Limit: 10,
		}
	}
	for _, q := range queries { // warm: load the partitions, prepare the statements
		if _, err := s.Search(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		hits, err := s.Search(ctx, queries[i%nq])
		lat = append(lat, time.Since(start))
		if err != nil || len(hits) == 0 {
			b.Fatalf("search: %d hits, %v", len(hits), err)
		}
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkEmbeddedUpsert upserts one record per operation (its own transaction),
// spread over 1,000 users.
func BenchmarkEmbeddedUpsert(b *testing.B) {
	s, _ := openBenchStore(b)
	ctx := context.Background()
	texts, vecs := embeddedSentences(3, 12)
	n := 0
	for b.Loop() {
		r := vectorstore.Record{
			ID: vectorstore.DeterministicID("upsert", fmt.Sprint(n)), Tenant: "acme", UserID: fmt.Sprintf("u%d", n%benchUsers),
			MemoryType: vectorstore.Episodic, Text: texts[n%len(texts)], Vector: vecs[n%len(vecs)], TS: time.Unix(int64(n), 0),
		}
		if err := s.Upsert(ctx, r); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkEmbeddedUpdatePayload is the consolidator's hit update: one record's
// hit count raised by one, in a warm partition of the 100,000-record store.
func BenchmarkEmbeddedUpdatePayload(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	const users = 64
	for u := range users { // warm: load the partitions
		if _, _, err := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: fmt.Sprintf("u%d", u)}, "", 1); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		// Record n belongs to user n % benchUsers (benchStore).
		n := (i%users + benchUsers*(i/users)) % benchRecords
		if err := s.UpdatePayload(ctx, "acme", fmt.Sprintf("u%d", n%benchUsers), vectorstore.DeterministicID("bench", fmt.Sprint(n)),
			vectorstore.Patch{HitCountDelta: 1}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkEmbeddedMemory reports what the partition cache holds per record
// (B/record: live heap after reading every partition of the 100,000-record store)
// and times a Count of one warm partition of 100 records.
func BenchmarkEmbeddedMemory(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	before, after := loadEveryPartition(b, s)
	for b.Loop() {
		if _, err := s.Count(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchRecords, "B/record")
}

// loadEveryPartition reads one partition after another of the benchmark store's
// users into the cache and returns the memory statistics, after a GC, before and
// after.
func loadEveryPartition(b *testing.B, s vectorstore.Store) (before, after runtime.MemStats) {
	b.Helper()
	ctx := context.Background()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for u := range benchUsers {
		// A read of one record loads the whole partition (Count would not: it asks
		// SQLite for a partition that is not loaded).
		if _, _, err := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: fmt.Sprintf("u%d", u)}, "", 1); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return before, after
}

// BenchmarkEmbeddedUpdatePayloads is the consolidator's hit batch: 100 records of
// one warm partition each get hit_count + 1 and a new hit_events list, either
// one UpdatePayload per record or one UpdatePayloads for all of them, in a store
// of 10,000 records (100 users); see reportPerRecord.
func BenchmarkEmbeddedUpdatePayloads(b *testing.B) {
	const users, perUser = 100, 100
	s, emb := openBenchStore(b)
	gen := newBenchText(5)
	ctx := context.Background()
	ids := make([][]string, users)
	for u := range users {
		texts := make([]string, perUser)
		for i := range texts {
			texts[i] = gen.sentence(24)
		}
		vecs, _ := emb.Embed(ctx, texts)
		recs := make([]vectorstore.Record, perUser)
		for i := range recs {
			id := vectorstore.DeterministicID("hits", fmt.Sprint(u), fmt.Sprint(i))
			recs[i] = vectorstore.Record{ID: id, Tenant: "acme", UserID: fmt.Sprintf("u%d", u), MemoryType: vectorstore.Semantic,
				Text: texts[i], Vector: vecs[i], TS: time.Unix(int64(i), 0), Metadata: map[string]any{"thing": texts[i], "source_event_ids": []any{"e1"}}}
			ids[u] = append(ids[u], id)
		}
		if err := s.Upsert(ctx, recs...); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: fmt.Sprintf("u%d", u)}, "", 1); err != nil {
			b.Fatal(err) // warm: load the partition
		}
	}
	patches := func(n int) map[string]vectorstore.Patch {
		ps := make(map[string]vectorstore.Patch, perUser)
		for _, id := range ids[n%users] {
			ps[id] = vectorstore.Patch{HitCountDelta: 1, Metadata: map[string]any{"hit_events": []any{fmt.Sprint("event-", n)}}}
		}
		return ps
	}
	b.Run("one-by-one", func(b *testing.B) {
		n := 0
		cpu := bustest.ProcessCPU(b)
		for b.Loop() {
			for id, p := range patches(n) {
				if err := s.UpdatePayload(ctx, "acme", fmt.Sprintf("u%d", n%users), id, p); err != nil {
					b.Fatal(err)
				}
			}
			n++
		}
		reportPerRecord(b, cpu, b.N*perUser)
	})
	b.Run("batch", func(b *testing.B) {
		n := 0
		cpu := bustest.ProcessCPU(b)
		for b.Loop() {
			missing, err := s.UpdatePayloads(ctx, "acme", fmt.Sprintf("u%d", n%users), patches(n))
			if err != nil || len(missing) > 0 {
				b.Fatalf("UpdatePayloads: missing %v, %v", missing, err)
			}
			n++
		}
		reportPerRecord(b, cpu, b.N*perUser)
	})
}

// reportPerRecord reports the wall time and the process CPU (since cpuBefore,
// background checkpoints included) per record written. CPU is the figure to
// compare on a shared machine: wall time also counts waiting for a core.
func reportPerRecord(b *testing.B, cpuBefore time.Duration, records int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64((bustest.ProcessCPU(b)-cpuBefore).Nanoseconds())/float64(records), "cpu-ns/record")
}

// openBenchStore opens an embedded store in b's temporary directory, closed when
// b ends, and the offline embedder of its dimensions.
func openBenchStore(b *testing.B) (*embedded.Store, *embed.Local) {
	b.Helper()
	s, err := embedded.New(embedded.Config{Path: filepath.Join(b.TempDir(), "bench.db"), Dimensions: benchDims}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	emb, err := embed.NewLocal(embed.LocalConfig{Dimensions: benchDims})
	if err != nil {
		b.Fatal(err)
	}
	return s, emb
}

// BenchmarkOpenExisting times the start-up on an existing store file, named by
// $AGENTMEM_BENCH_STORE (e.g. the vectors.db of `agentmem bench --memories
// 1000000 --data-dir D`; skipped without it): opening it (open-ms), then the
// first read of one of its partitions, which loads the partition (load-ms, and
// the process's CPU meanwhile, load-cpu-ms).
// Nothing else is read or built at start-up: other partitions load on their
// first read, a type's graph is built in the background after its first dense
// search (the read is a sparse search, which starts none, so that runs on a
// store find it as they left it).
func BenchmarkOpenExisting(b *testing.B) {
	path := os.Getenv("AGENTMEM_BENCH_STORE")
	if path == "" {
		b.Skip("AGENTMEM_BENCH_STORE names no store file")
	}
	ctx := context.Background()
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	var tenant, user, text string
	var dims int
	err = db.QueryRowContext(ctx, `SELECT tenant, user_id, length(vector)/4, text FROM records LIMIT 1`).Scan(&tenant, &user, &dims, &text)
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	var open, load, loadCPU time.Duration
	for b.Loop() {
		start := time.Now()
		s, err := embedded.New(embedded.Config{Path: path, Dimensions: dims}, nil)
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(start)
		start, cpu := time.Now(), bustest.ProcessCPU(b)
		hits, err := s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: tenant, UserID: user}, Text: text, Mode: vectorstore.Sparse, Limit: 1})
		load, loadCPU = load+time.Since(start), loadCPU+bustest.ProcessCPU(b)-cpu
		if err != nil || len(hits) == 0 {
			b.Fatalf("search: %d hits, %v", len(hits), err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(open.Milliseconds())/float64(b.N), "open-ms")
	b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "load-ms")
	// The process's CPU over the load, the figure to compare on a shared machine.
	b.ReportMetric(float64(loadCPU.Milliseconds())/float64(b.N), "load-cpu-ms")
}
