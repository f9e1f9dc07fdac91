package vectorstore

import (
	"context"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

func testStore(t *testing.T) *Embedded {
	t.Helper()
	s, err := NewEmbedded(EmbeddedConfig{Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: 3}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testRecord(id string) Record {
	return Record{
		ID: id, Tenant: "acme", UserID: "u1", MemoryType: Episodic, Text: "tea in the morning", Vector: []float32{1, 0, 0},
		TS: time.Unix(1, 0).UTC(), Metadata: map[string]any{"who": "user", "source_meta": []any{map[string]any{"dia_id": "D1:1"}}},
	}
}

// Each read decodes its own metadata from the partition, so a caller changing a
// returned map changes neither the partition nor another caller's record.
func TestReadsReturnTheirOwnMetadata(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	rec := testRecord(DeterministicID("own"))
	if err := s.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	first, err := s.Get(ctx, "acme", "u1", rec.ID)
	if err != nil || len(first) != 1 {
		t.Fatalf("get: %v %v", first, err)
	}
	first[0].Metadata["who"] = "changed"
	first[0].Metadata["source_meta"].([]any)[0].(map[string]any)["dia_id"] = "changed"
	hits, err := s.Search(ctx, Query{Filter: Filter{Tenant: "acme", UserID: "u1"}, Vector: []float32{1, 0, 0}, Mode: Dense, Limit: 1})
	if err != nil || len(hits) != 1 {
		t.Fatalf("search: %v %v", hits, err)
	}
	if !reflect.DeepEqual(hits[0].Record.Metadata, rec.Metadata) {
		t.Fatalf("metadata after a caller changed its copy: %v, want %v", hits[0].Record.Metadata, rec.Metadata)
	}
}

// An entry that cannot be built (metadata that does not encode) must not leave
// the loaded partition stale: it is unloaded, and the next read loads the
// committed rows.
func TestCachePutUnloadsThePartitionOnABadEntry(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	rec := testRecord(DeterministicID("bad"))
	if err := s.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Count(ctx, Filter{Tenant: "acme", UserID: "u1"}); err != nil || n != 1 {
		t.Fatalf("count: %d %v", n, err)
	}
	k := partKey{"acme", "u1"}
	bad := rec
	bad.Metadata = map[string]any{"x": math.NaN()}
	s.cacheMu.Lock()
	s.cachePut(1, bad)
	_, loaded := s.parts[k]
	s.cacheMu.Unlock()
	if loaded {
		t.Fatal("the partition stayed loaded after an entry failed to build")
	}
	got, err := s.Get(ctx, "acme", "u1", rec.ID)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Metadata, rec.Metadata) {
		t.Fatalf("get after the unload: %v %v", got, err)
	}
}
