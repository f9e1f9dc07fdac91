package embedded

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func testStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(Config{Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: 3}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testRecord(id string) vectorstore.Record {
	return vectorstore.Record{
		ID: id, Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Episodic, Text: "tea in the morning", Vector: []float32{1, 0, 0},
		TS: time.Unix(1, 0).UTC(), Metadata: map[string]any{"who": "user", "source_meta": []any{map[string]any{"dia_id": "D1:1"}}},
	}
}

// Each read decodes its own metadata from the partition, so a caller changing a
// returned map changes neither the partition nor another caller's record.
func TestReadsReturnTheirOwnMetadata(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	rec := testRecord(vectorstore.DeterministicID("own"))
	if err := s.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	first, err := s.Get(ctx, "acme", "u1", rec.ID)
	if err != nil || len(first) != 1 {
		t.Fatalf("get: %v %v", first, err)
	}
	first[0].Metadata["who"] = "changed"
	first[0].Metadata["source_meta"].([]any)[0].(map[string]any)["dia_id"] = "changed"
	hits, err := s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Vector: []float32{1, 0, 0}, Mode: vectorstore.Dense, Limit: 1})
	if err != nil || len(hits) != 1 {
		t.Fatalf("search: %v %v", hits, err)
	}
	if !reflect.DeepEqual(hits[0].Record.Metadata, rec.Metadata) {
		t.Fatalf("metadata after a caller changed its copy: %v, want %v", hits[0].Record.Metadata, rec.Metadata)
	}
}

// Count asks SQLite about a partition that is not in memory, without loading it,
// and its answers are the loaded partition's.
func TestCountAgreesLoadedOrNot(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	var recs []vectorstore.Record
	for i, mt := range []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item} {
		r := testRecord(vectorstore.DeterministicID("count", string(mt), time.Duration(i).String()))
		r.MemoryType, r.Metadata = mt, map[string]any{"n": float64(i), "who": "user"}
		if i == 1 {
			r.ExpiresAt = now.Add(-time.Hour)
		}
		recs = append(recs, r)
	}
	if err := s.Upsert(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	filters := []struct {
		f    vectorstore.Filter
		want int
	}{
		{vectorstore.Filter{}, 3},
		{vectorstore.Filter{IncludeExpired: true}, 4},
		{vectorstore.Filter{ExpiredOnly: true}, 1},
		{vectorstore.Filter{MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}, 1},
		{vectorstore.Filter{Payload: map[string]any{"n": 2}}, 1},
		{vectorstore.Filter{Payload: map[string]any{"who": "user"}, IDs: []string{recs[0].ID, recs[3].ID}}, 2},
	}
	count := func(f vectorstore.Filter) int {
		f.Tenant, f.UserID = "acme", "u1"
		n, err := s.Count(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	loaded := func() bool {
		s.b.cacheMu.RLock()
		defer s.b.cacheMu.RUnlock()
		return s.b.parts[partKey{"acme", "u1"}] != nil
	}
	for _, c := range filters {
		if got := count(c.f); got != c.want {
			t.Errorf("count %+v from SQLite = %d, want %d", c.f, got, c.want)
		}
	}
	if loaded() {
		t.Fatal("Count loaded the partition")
	}
	if _, _, err := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"}, "", 1); err != nil || !loaded() {
		t.Fatalf("scroll did not load the partition: %v", err)
	}
	for _, c := range filters {
		if got := count(c.f); got != c.want {
			t.Errorf("count %+v in memory = %d, want %d", c.f, got, c.want)
		}
	}
}

// A search WithoutMetadata returns the same hits with Metadata nil, and Get then
// reads a hit's metadata.
func TestSearchWithoutMetadata(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	a, b := testRecord(vectorstore.DeterministicID("a")), testRecord(vectorstore.DeterministicID("b"))
	b.Vector, b.Text = []float32{0, 1, 0}, "coffee at night"
	if err := s.Upsert(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	q := vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Vector: []float32{1, 0.5, 0}, Text: "tea", Mode: vectorstore.Hybrid, Limit: 2}
	full, err := s.Search(ctx, q)
	if err != nil || len(full) != 2 {
		t.Fatalf("search: %v %v", full, err)
	}
	q.WithoutMetadata = true
	bare, err := s.Search(ctx, q)
	if err != nil || len(bare) != len(full) {
		t.Fatalf("search without metadata: %v %v", bare, err)
	}
	for i, h := range bare {
		want := full[i]
		want.Record.Metadata = nil
		if !reflect.DeepEqual(h, want) {
			t.Fatalf("hit %d without metadata = %+v, want %+v", i, h, want)
		}
	}
	got, err := s.Get(ctx, "acme", "u1", bare[0].Record.ID)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], full[0].Record) {
		t.Fatalf("get after the search: %v %v, want %v", got, err, full[0].Record)
	}
}

// A namespace read without records stays loaded: reading it again needs
// neither SQLite nor writeMu, so it does not wait for a write transaction (an
// agent or tenant scope without memories is read by every context request),
// and a write to it is found by the next search.
func TestEmptyPartitionIsKept(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	q := vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Vector: []float32{1, 0, 0}, Mode: vectorstore.Dense, Limit: 5}
	if hits, err := s.Search(ctx, q); err != nil || len(hits) != 0 {
		t.Fatalf("search of an empty namespace: %v %v", hits, err)
	}
	s.b.writeMu.Lock() // a write transaction running
	done := make(chan error, 1)
	go func() {
		_, err := s.Search(ctx, q)
		done <- err
	}()
	select {
	case err := <-done:
		s.b.writeMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		s.b.writeMu.Unlock()
		<-done
		t.Fatal("a second search of the empty namespace waited for writeMu")
	}
	rec := testRecord(vectorstore.DeterministicID("kept"))
	if err := s.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, q)
	if err != nil || len(hits) != 1 || hits[0].Record.ID != rec.ID {
		t.Fatalf("search after a write to the kept empty partition: %v %v, want %s", hits, err, rec.ID)
	}
}

// At most maxEmptyParts partitions without records stay loaded, the oldest
// going first; one that got a record since it was loaded empty stays.
func TestEmptyPartitionsAreBounded(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	read := func(user string) {
		t.Helper()
		if _, err := s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: user}, Vector: []float32{1, 0, 0}, Mode: vectorstore.Dense, Limit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	loaded := func(user string) bool {
		s.b.cacheMu.RLock()
		defer s.b.cacheMu.RUnlock()
		return s.b.parts[partKey{"acme", user}] != nil
	}
	read("u1")
	read("e1")
	if err := s.Upsert(ctx, testRecord(vectorstore.DeterministicID("grown"))); err != nil { // into u1
		t.Fatal(err)
	}
	for i := range maxEmptyParts {
		read(fmt.Sprintf("n%d", i))
	}
	if !loaded("u1") {
		t.Error("the partition that got a record was dropped")
	}
	if loaded("e1") || !loaded("n0") || !loaded(fmt.Sprintf("n%d", maxEmptyParts-1)) {
		t.Errorf("loaded: e1 %v, n0 %v, newest %v; want the oldest empty one (e1) dropped, the newer kept",
			loaded("e1"), loaded("n0"), loaded(fmt.Sprintf("n%d", maxEmptyParts-1)))
	}
	s.b.cacheMu.RLock()
	n := len(s.b.parts)
	s.b.cacheMu.RUnlock()
	if n != maxEmptyParts+1 {
		t.Errorf("%d partitions loaded, want %d: the %d newest empty ones and u1", n, maxEmptyParts+1, maxEmptyParts)
	}
}
