package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
	"github.com/agentmem/agentmem/pkg/vectorstore/vectorstoretest"
	"go.uber.org/zap/zaptest"
)

func openEmbedded(t testing.TB, path string, dims int) *embedded.Store {
	t.Helper()
	s, err := embedded.New(embedded.Config{Path: path, Dimensions: dims}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestEmbeddedConformance(t *testing.T) {
	vectorstoretest.RunSuite(t, func(t *testing.T) vectorstore.Store {
		return openEmbedded(t, filepath.Join(t.TempDir(), "vectors.db"), vectorstoretest.Dimensions)
	})
}

func TestEmbeddedConformanceInMemory(t *testing.T) {
	vectorstoretest.RunSuite(t, func(t *testing.T) vectorstore.Store {
		return openEmbedded(t, embedded.MemoryPath, vectorstoretest.Dimensions)
	})
}

// The dense search through the graphs (every memory type indexed from its first
// record, the indexer racing the suite's writes and reads) answers as the exact
// scan does.
func TestEmbeddedConformanceWithGraphs(t *testing.T) {
	vectorstoretest.RunSuite(t, func(t *testing.T) vectorstore.Store {
		s, err := embedded.New(embedded.Config{Path: embedded.MemoryPath, Dimensions: vectorstoretest.Dimensions, ANNThreshold: 1}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// With a budget of one loaded record, nearly every read loads its partition
// and drops the others: the suite's semantics hold all the same.
func TestEmbeddedConformanceEvicting(t *testing.T) {
	vectorstoretest.RunSuite(t, func(t *testing.T) vectorstore.Store {
		s, err := embedded.New(embedded.Config{Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: vectorstoretest.Dimensions, MaxLoadedRecords: 1}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func unit(dims, i int) []float32 {
	v := make([]float32, dims)
	v[i%dims] = 1
	return v
}

func TestEmbeddedPersistence(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vectors.db")
	s, err := embedded.New(embedded.Config{Path: path, Dimensions: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]vectorstore.Record, 10)
	for i := range recs {
		recs[i] = vectorstore.Record{
			ID: vectorstore.DeterministicID("persist", fmt.Sprint(i)), Tenant: "acme", UserID: "u1",
			MemoryType: vectorstore.Episodic, Text: fmt.Sprintf("memory number %d about budget", i), Vector: unit(4, i),
			Metadata: map[string]any{"i": i},
		}
	}
	if err := s.Upsert(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	// Search once so the partition is cached, then change it: the reopened store
	// must see the change even though nothing is cached yet.
	q := vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Vector: unit(4, 1), Text: "budget", Mode: vectorstore.Hybrid, Limit: 3}
	if _, err := s.Search(ctx, q); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Delete(ctx, "acme", "u1", recs[9].ID); err != nil || n != 1 {
		t.Fatalf("Delete: %d, %v", n, err)
	}
	if err := s.UpdatePayload(ctx, "acme", "u1", recs[0].ID, vectorstore.Patch{HitCountDelta: 7}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Count(ctx, q.Filter); !errors.Is(err, vectorstore.ErrClosed) {
		t.Fatalf("Count after Close: %v, want ErrClosed", err)
	}

	s2 := openEmbedded(t, path, 4)
	if n, err := s2.Count(ctx, q.Filter); err != nil || n != 9 {
		t.Fatalf("after reopening: Count = %d, %v; want 9", n, err)
	}
	got, err := s2.Get(ctx, "acme", "u1", recs[0].ID)
	if err != nil || len(got) != 1 || got[0].HitCount != 7 || got[0].Metadata["i"] != 0.0 {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
	hits, err := s2.Search(ctx, q)
	if err != nil || len(hits) != 3 || hits[0].Record.ID != recs[1].ID {
		t.Fatalf("after reopening: search = %+v, %v; want record 1 first", hits, err)
	}
	sparse, err := s2.Search(ctx, vectorstore.Query{Filter: q.Filter, Text: "number 9", Mode: vectorstore.Sparse, Limit: 20})
	if err != nil || len(sparse) != 9 {
		t.Fatalf("sparse search after reopening: %d hits, %v; want 9 (the deleted record gone)", len(sparse), err)
	}
}

func TestEmbeddedRefusesSecondOpenAndOtherDimensions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vectors.db")
	s := openEmbedded(t, path, 4)
	if _, err := embedded.New(embedded.Config{Path: path, Dimensions: 4}, nil); err == nil {
		t.Fatal("a second store opened the same file")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.New(embedded.Config{Path: path, Dimensions: 8}, nil); !errors.Is(err, vectorstore.ErrDimension) {
		t.Fatalf("reopening with other dimensions: %v, want ErrDimension", err)
	}
}

func TestEmbeddedConfigValidate(t *testing.T) {
	for _, cfg := range []embedded.Config{
		{Dimensions: 4},
		{Path: "x.db"},
		{Path: "x.db?mode=ro", Dimensions: 4},
	} {
		if _, err := embedded.New(cfg, nil); !errors.Is(err, vectorstore.ErrInvalidConfig) {
			t.Errorf("config %+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// TestEmbeddedConcurrentWritesKeepVectorsInSync races writers against searches; the
// dense side must end up agreeing with the rows (run with -race).
func TestEmbeddedConcurrentWritesKeepVectorsInSync(t *testing.T) {
	ctx := context.Background()
	s := openEmbedded(t, filepath.Join(t.TempDir(), "vectors.db"), 8)
	f := vectorstore.Filter{Tenant: "acme", UserID: "u1"}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				id := vectorstore.DeterministicID(fmt.Sprint(w), fmt.Sprint(i))
				r := vectorstore.Record{ID: id, Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Episodic, Text: "concurrent memory", Vector: unit(8, i)}
				if err := s.Upsert(ctx, r); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if _, err := s.Delete(ctx, "acme", "u1", id); err != nil {
						errs <- err
						return
					}
				}
				if _, err := s.Search(ctx, vectorstore.Query{Filter: f, Vector: unit(8, i), Text: "memory", Mode: vectorstore.Hybrid, Limit: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, err := s.Count(ctx, f)
	if err != nil || n != 4*(25-9) {
		t.Fatalf("Count = %d, %v; want %d", n, err, 4*(25-9))
	}
	hits, err := s.Search(ctx, vectorstore.Query{Filter: f, Vector: unit(8, 1), Mode: vectorstore.Dense, Limit: 1000})
	if err != nil || len(hits) != n {
		t.Fatalf("dense search sees %d records, the table %d (%v)", len(hits), n, err)
	}
}

// A batched payload update reads its records from the loaded partition when it
// can and from SQLite when it cannot; both must give the same records, and a
// patch without a vector must leave the vector bit for bit as it was, in memory
// and on disk (the cache holds it normalised, so it is neither written back nor
// normalised again).
func TestEmbeddedUpdatePayloadsKeepsVectorsExactly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vectors.db")
	s := openEmbedded(t, path, 3)
	f := vectorstore.Filter{Tenant: "acme", UserID: "u1"}
	// Not unit length; normalising the first one twice moves a bit.
	recs := []vectorstore.Record{
		{ID: vectorstore.DeterministicID("exact", "1"), Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Episodic, Text: "first", Vector: []float32{1.3, 1.6, 1.3}},
		{ID: vectorstore.DeterministicID("exact", "2"), Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Semantic, Text: "second", Vector: []float32{2.1, -0.4, 0.05}},
	}
	if err := s.Upsert(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	read := func(s *embedded.Store) map[string]vectorstore.Record {
		t.Helper()
		got, _, err := s.Scroll(ctx, f, "", 10)
		if err != nil || len(got) != len(recs) {
			t.Fatalf("Scroll: %d records, %v", len(got), err)
		}
		out := make(map[string]vectorstore.Record, len(got))
		for _, r := range got {
			out[r.ID] = r
		}
		return out
	}
	hit := func(n int) map[string]vectorstore.Patch {
		return map[string]vectorstore.Patch{
			recs[0].ID: {HitCountDelta: 1, Metadata: map[string]any{"n": n}},
			recs[1].ID: {HitCountDelta: 2},
		}
	}
	// The first batch finds the partition unloaded (SQLite); Scroll loads it, so
	// the second batch reads it from memory.
	if _, err := s.UpdatePayloads(ctx, "acme", "u1", hit(1)); err != nil {
		t.Fatal(err)
	}
	before := read(s)
	if _, err := s.UpdatePayloads(ctx, "acme", "u1", hit(2)); err != nil {
		t.Fatal(err)
	}
	after := read(s)
	for _, r := range recs {
		b, a := before[r.ID], after[r.ID]
		if !slices.Equal(a.Vector, b.Vector) {
			t.Errorf("%s: vector %v after an update from memory, was %v", r.ID, a.Vector, b.Vector)
		}
		if a.HitCount != 2*b.HitCount {
			t.Errorf("%s: hit count %d after two batches, want %d", r.ID, a.HitCount, 2*b.HitCount)
		}
	}
	if got := after[recs[0].ID].Metadata["n"]; got != 2.0 {
		t.Errorf("metadata n = %v, want 2", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := read(openEmbedded(t, path, 3))
	for _, r := range recs {
		if got, want := reopened[r.ID], after[r.ID]; !slices.Equal(got.Vector, want.Vector) || got.HitCount != want.HitCount {
			t.Errorf("%s after reopening: vector %v hits %d, want %v and %d", r.ID, got.Vector, got.HitCount, want.Vector, want.HitCount)
		}
	}
}

// One Upsert encodes its rows one after another in the same argument slices:
// every row of a batch must still reach the file with its own vector and
// metadata, read back after reopening (so from SQLite, not the partition cache).
func TestEmbeddedUpsertBatchStoresEachRow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vectors.db")
	const dims = 8
	recs := make([]vectorstore.Record, 20)
	for i := range recs {
		vec := make([]float32, dims)
		for j := range vec {
			vec[j] = float32((i+1)*(j+3)%17) - 8.5
		}
		recs[i] = vectorstore.Record{
			ID: vectorstore.DeterministicID("batch-rows", fmt.Sprint(i)), Tenant: "acme", UserID: "u1",
			MemoryType: vectorstore.Episodic, Text: fmt.Sprintf("row %d", i), Vector: vec,
			Metadata: map[string]any{"i": float64(i), "tag": strings.Repeat("x", i)},
		}
	}
	s := openEmbedded(t, path, dims)
	if err := s.Upsert(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openEmbedded(t, path, dims)
	for _, r := range recs {
		got, err := s.Get(ctx, "acme", "u1", r.ID)
		if err != nil || len(got) != 1 {
			t.Fatalf("Get %s: %v, %v", r.ID, got, err)
		}
		want := slices.Clone(r.Vector)
		embed.Normalize(want)
		if !slices.Equal(got[0].Vector, want) || !reflect.DeepEqual(got[0].Metadata, r.Metadata) || got[0].Text != r.Text {
			t.Errorf("%s: vector %v metadata %v text %q; want %v, %v, %q", r.ID, got[0].Vector, got[0].Metadata, got[0].Text, want, r.Metadata, r.Text)
		}
	}
}

// Batches of many rows through the reused argument slices and multi-row
// statements: every record lands, an id twice in a batch keeps its last record
// (in SQLite and in the loaded partition alike), whether both are in one
// statement or not, and a conflict anywhere in the batch (in a full chunk or in
// the smaller statements of its rest) names its record and writes none.
func TestEmbeddedUpsertLargeBatches(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vectors.db")
	s := openEmbedded(t, path, 4)
	mk := func(user string, i int) vectorstore.Record {
		return vectorstore.Record{
			ID: vectorstore.DeterministicID("large", fmt.Sprint(i)), Tenant: "acme", UserID: user,
			MemoryType: vectorstore.Episodic, Text: fmt.Sprintf("record %d", i), Vector: unit(4, i),
		}
	}
	// Load u1's partition first, so that the batch also goes through the cache.
	if err := s.Upsert(ctx, mk("u1", 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "acme", "u1", mk("u1", 1000).ID); err != nil {
		t.Fatal(err)
	}
	batch := make([]vectorstore.Record, 87)
	for i := range batch {
		batch[i] = mk("u1", i)
	}
	// 3 and 40 go in different statements, 10 and 20 in the same one.
	batch[40].ID = batch[3].ID
	batch[20].ID = batch[10].ID
	if err := s.Upsert(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	check := func(s *embedded.Store, when string) {
		t.Helper()
		// 85 from the batch, and the record written before it.
		if n, err := s.Count(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"}); err != nil || n != 86 {
			t.Fatalf("%s: Count = %d, %v; want 86", when, n, err)
		}
		for i, r := range batch {
			got, err := s.Get(ctx, "acme", "u1", r.ID)
			want := r.Text
			switch i {
			case 3:
				want = batch[40].Text
			case 10:
				want = batch[20].Text
			}
			if err != nil || len(got) != 1 || got[0].Text != want {
				t.Fatalf("%s: record %d: %+v, %v; want text %q", when, i, got, err, want)
			}
		}
	}
	check(s, "from the loaded partition")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openEmbedded(t, path, 4)
	check(s, "after reopening")

	theirs := mk("u2", 2000)
	if err := s.Upsert(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	for name, conflict := range map[string]func(b []vectorstore.Record) (id string){
		"a stored id": func(b []vectorstore.Record) string {
			b[30].ID = theirs.ID
			return theirs.ID
		},
		"one new id for two partitions": func(b []vectorstore.Record) string {
			b[20].ID, b[20].UserID = b[10].ID, "u3"
			return b[10].ID
		},
		"a stored id in the last statement": func(b []vectorstore.Record) string {
			b[len(b)-1].ID = theirs.ID
			return theirs.ID
		},
		"one new id for two partitions in the rest": func(b []vectorstore.Record) string {
			b[68].ID, b[68].UserID = b[65].ID, "u3"
			return b[65].ID
		},
	} {
		b := make([]vectorstore.Record, 70)
		for i := range b {
			b[i] = mk("u1", 3000+i)
		}
		id := conflict(b)
		if err := s.Upsert(ctx, b...); !errors.Is(err, vectorstore.ErrConflict) || !strings.Contains(err.Error(), id) {
			t.Errorf("batch with %s: %v, want ErrConflict naming %s", name, err, id)
		}
		for user, want := range map[string]int{"u1": 86, "u3": 0} {
			if n, err := s.Count(ctx, vectorstore.Filter{Tenant: "acme", UserID: user}); err != nil || n != want {
				t.Errorf("batch with %s: %s holds %d records (%v), want %d", name, user, n, err, want)
			}
		}
	}
}

// An upsert whose context is done writes nothing: the rows go in without the
// context's cancellation (cheaper), so Upsert checks it itself.
func TestEmbeddedUpsertHonoursACancelledContext(t *testing.T) {
	s := openEmbedded(t, filepath.Join(t.TempDir(), "vectors.db"), 4)
	rec := func(text string) vectorstore.Record {
		return vectorstore.Record{ID: vectorstore.DeterministicID(text), Tenant: "acme", UserID: "u1",
			MemoryType: vectorstore.Episodic, Text: text, Vector: []float32{1, 0, 0, 0}, TS: time.Unix(1, 0)}
	}
	// A first upsert prepares and caches the statement, so the second one reaches
	// its rows without another context-aware call before them.
	if err := s.Upsert(context.Background(), rec("stored")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Upsert(ctx, rec("never stored")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Upsert with a cancelled context: %v, want context.Canceled", err)
	}
	if n, err := s.Count(context.Background(), vectorstore.Filter{Tenant: "acme", UserID: "u1"}); err != nil || n != 1 {
		t.Fatalf("count after a cancelled upsert = %d, %v; want 1", n, err)
	}
}
