package embedded

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const loadTestDims = 8

var loadTestKey = partKey{"acme", "u1"}

func openLoadStore(t interface{ Fatal(...any) }, path string) *Store {
	s, err := New(Config{Path: path, Dimensions: loadTestDims, ANNThreshold: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loadTestRecord is record i of the load tests: a text of a few words of a
// small vocabulary (so searches tie and rank on the corpus statistics), a
// vector with more bits than a unit one.
func loadTestRecord(i int, words []string, vec []float32, typ vectorstore.MemoryType) vectorstore.Record {
	text := ""
	for j, w := range words {
		if j > 0 {
			text += " "
		}
		text += w
	}
	return vectorstore.Record{
		ID: vectorstore.DeterministicID("load", fmt.Sprint(i)), Tenant: loadTestKey.tenant, UserID: loadTestKey.userID,
		MemoryType: typ, Text: text, Vector: vec, TS: time.UnixMicro(int64(1e15 + i)), Metadata: map[string]any{"i": i},
	}
}

// loadedEntry is what a partition holds of a record, whatever its doc number.
type loadedEntry struct {
	rid         int64
	rec         vectorstore.Record
	vecBits     []uint32
	meta, terms string
	ts, expires int64
	hasExpiry   bool
}

// entriesOf returns the live entries of k's partition by id, and its keyword
// statistics.
func entriesOf(t interface{ Fatal(...any) }, s *Store, k partKey) (map[string]loadedEntry, [2]int64) {
	out := map[string]loadedEntry{}
	var stats [2]int64
	partitionOf(t, s, k, func(p *partition) {
		for _, e := range p.docs {
			if e == nil {
				continue
			}
			le := loadedEntry{rid: e.rid, rec: e.rec, meta: e.meta, terms: e.terms, ts: e.ts, expires: e.expires, hasExpiry: e.hasExpiry}
			le.rec.Vector = nil
			for _, f := range e.rec.Vector {
				le.vecBits = append(le.vecBits, math.Float32bits(f))
			}
			out[e.rec.ID] = le
		}
		stats = [2]int64{p.lex.total, int64(p.lex.live)}
	})
	return out, stats
}

// sequentialPartition is k's partition as a store's writes build it, one
// record at a time (newEntry, put), from the rows of s's file: the reference
// the parallel load is held to.
func sequentialPartition(t interface{ Fatal(...any) }, s *Store, k partKey) *partition {
	p := newPartition(k, 0)
	rows, err := s.b.db.Query(`SELECT `+recordCols+` FROM records r WHERE r.tenant = ? AND r.user_id = ? ORDER BY rid`, k.tenant, k.userID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		rec, rid, meta, err := scanRecord(rows)
		if err != nil {
			t.Fatal(err)
		}
		p.put(newEntry(rid, rec, meta))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return p
}

// A partition loaded from SQLite (the load's reader, builders and puts, over
// any number of batches) holds exactly what a partition built one write at a
// time holds: the same records with the same vectors bit for bit, the same
// terms and keyword statistics, and it ranks every search the same.
func TestPropertyLoadedPartitionIsTheSequentialOne(t *testing.T) {
	newPath := storePaths(t)
	vocabulary := []string{"tea", "coffee", "morning", "budget", "paris", "train", "meeting", "dog"}
	rapid.Check(t, func(t *rapid.T) {
		path := newPath(t)
		defer os.RemoveAll(filepath.Dir(path))
		ctx := context.Background()
		s := openLoadStore(t, path)
		defer func() { s.Close() }()
		word := rapid.SampledFrom(vocabulary)
		vec := rapid.SliceOfN(rapid.Float32Range(-1, 1), loadTestDims, loadTestDims)
		n := rapid.IntRange(1, 3*loadBatch+10).Draw(t, "records")
		live := map[string]bool{}
		var recs []vectorstore.Record
		for i := range n {
			r := loadTestRecord(i, rapid.SliceOfN(word, 0, 6).Draw(t, "words"), vec.Draw(t, "v"), rapid.SampledFrom(memoryTypes).Draw(t, "type"))
			recs = append(recs, r)
			live[r.ID] = true
		}
		for len(recs) > 0 {
			k := min(len(recs), rapid.IntRange(1, 300).Draw(t, "batch"))
			if err := s.Upsert(ctx, recs[:k]...); err != nil {
				t.Fatal(err)
			}
			recs = recs[k:]
		}
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, n-1), 0, 20).Draw(t, "deleted") {
			id := vectorstore.DeterministicID("load", fmt.Sprint(i))
			if _, err := s.Delete(ctx, "acme", "u1", id); err != nil {
				t.Fatal(err)
			}
			delete(live, id)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openLoadStore(t, path)
		loaded, loadedStats := entriesOf(t, s, loadTestKey) // the first read: the load
		ref, err := New(Config{Path: MemoryPath, Dimensions: loadTestDims, ANNThreshold: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		ref.b.parts[loadTestKey] = sequentialPartition(t, s, loadTestKey)
		want, wantStats := entriesOf(t, ref, loadTestKey)
		if len(want) != len(live) {
			t.Fatalf("the reference holds %d records, %d were written and not deleted", len(want), len(live))
		}
		if !reflect.DeepEqual(loaded, want) {
			for id, e := range want {
				if !reflect.DeepEqual(loaded[id], e) {
					t.Fatalf("record %s: loaded %+v, want %+v", id, loaded[id], e)
				}
			}
			t.Fatalf("loaded %d records (%v), want %d", len(loaded), slices.Sorted(maps.Keys(loaded)), len(want))
		}
		if loadedStats != wantStats {
			t.Fatalf("keyword statistics (tokens, live docs): loaded %v, want %v", loadedStats, wantStats)
		}
		depth := rapid.IntRange(1, 40).Draw(t, "depth")
		for _, q := range []vectorstore.Query{
			{Text: word.Draw(t, "q1") + " " + word.Draw(t, "q2"), Mode: vectorstore.Sparse},
			{Vector: vec.Draw(t, "qv"), Mode: vectorstore.Dense},
		} {
			q.Filter, q.Limit = vectorstore.Filter{Tenant: "acme", UserID: "u1"}, depth
			if got, want := hitStrings(t, s, q), hitStrings(t, ref, q); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s search: loaded\n%v\nwant\n%v", q.Mode, got, want)
			}
		}
	})
}

// storePaths returns a function giving each run of a property a store path in
// a directory of its own (the caller removes it).
func storePaths(t *testing.T) func(t *rapid.T) string {
	root, run := t.TempDir(), 0
	return func(t *rapid.T) string {
		run++
		dir := filepath.Join(root, fmt.Sprint(run))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, "vectors.db")
	}
}

// hitStrings is q's hits on s (hitKeys).
func hitStrings(t interface{ Fatal(...any) }, s *Store, q vectorstore.Query) []string {
	hits, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return hitKeys(hits)
}

// hitKeys is each hit as its id and its score's bits.
func hitKeys(hits []vectorstore.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, fmt.Sprintf("%s %x", h.Record.ID, math.Float64bits(h.Score)))
	}
	return out
}

// bigPartition writes n records into loadTestKey's partition of a new store,
// closes it and returns it opened again, so that the first read loads them.
func bigPartition(t *testing.T, n int) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vectors.db")
	s := openLoadStore(t, path)
	var recs []vectorstore.Record
	for i := range n {
		recs = append(recs, loadTestRecord(i, []string{"tea", "budget"}, loadTestVector(i), vectorstore.Episodic))
	}
	for len(recs) > 0 {
		k := min(len(recs), 1000)
		if err := s.Upsert(context.Background(), recs[:k]...); err != nil {
			t.Fatal(err)
		}
		recs = recs[k:]
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openLoadStore(t, path)
	t.Cleanup(func() { s.Close() })
	return s
}

// loadTestVector is a vector of record i's: a few directions, so that dense
// searches tie.
func loadTestVector(i int) []float32 {
	return []float32{float32(i % 5), 1, 0, 0, 0, 0, 0, 0}
}

// Writes to a partition while it loads are never lost: each one, committed
// before, during or after the load, is in the partition the load publishes
// (reads serve it) as it was last written.
func TestWritesDuringALoadAreKept(t *testing.T) {
	const n = 4000
	s := bigPartition(t, n)
	ctx := context.Background()
	loaded := make(chan struct{})
	started := make(chan struct{})
	written := map[string]string{} // id → its last text
	var wErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		// New records, and texts rewritten on records the load reads, one write
		// at a time until the load is over, then one more.
		for i := 0; ; i++ {
			over := false
			select {
			case <-loaded:
				over = true
			default:
			}
			r := loadTestRecord(n+i, []string{"coffee", fmt.Sprintf("w%d", i)}, loadTestVector(i), vectorstore.Semantic)
			if i%2 == 1 {
				r = loadTestRecord(i, []string{"paris", fmt.Sprintf("w%d", i)}, loadTestVector(i), vectorstore.Episodic)
			}
			if wErr = s.Upsert(ctx, r); wErr != nil {
				return
			}
			written[r.ID] = r.Text
			if i == 0 {
				close(started)
			}
			if over {
				return
			}
		}
	})
	<-started
	partitionOf(t, s, loadTestKey, func(*partition) {})
	close(loaded)
	wg.Wait()
	if wErr != nil {
		t.Fatal(wErr)
	}
	if len(written) < 3 {
		t.Fatalf("only %d writes ran beside the load", len(written))
	}
	got, _ := entriesOf(t, s, loadTestKey)
	for id, text := range written {
		if got[id].rec.Text != text {
			t.Fatalf("record %s written as %q during the load holds %q after it (of %d writes)", id, text, got[id].rec.Text, len(written))
		}
	}
	if want := n + (len(written)+1)/2; len(got) != want {
		t.Fatalf("%d records after the load, want %d", len(got), want)
	}
}

// Reads of a partition that is loading wait for the load and rank as reads
// after it: no read sees a part of the partition.
func TestReadsDuringALoadSeeAllOfIt(t *testing.T) {
	const n = 3000
	s := bigPartition(t, n)
	ctx := context.Background()
	q := vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Text: "budget", Mode: vectorstore.Sparse, Limit: 10}
	const readers = 4
	results := make([][]string, readers)
	counts := make([]int, readers)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			hits, err := s.Search(ctx, q)
			all, _, err2 := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"}, "", n+1)
			results[r], counts[r], errs[r] = hitKeys(hits), len(all), errors.Join(err, err2)
		})
	}
	wg.Wait()
	after := hitStrings(t, s, q)
	for r := range readers {
		if errs[r] != nil {
			t.Fatal(errs[r])
		}
		if counts[r] != n || !reflect.DeepEqual(results[r], after) {
			t.Fatalf("reader %d during the load: %d records, top %v; after it: %d, %v", r, counts[r], results[r], n, after)
		}
	}
}

// A load whose read is cancelled stops, returns the cancellation, and leaves
// the partition to the next read, which loads all of it.
func TestCancelledLoadStops(t *testing.T) {
	const n = 2000
	s := bigPartition(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	var puts int
	s.b.writeMu.Lock()
	err := s.b.loadEntries(ctx, loadTestKey, func(*entry) {
		if puts++; puts == loadBatch {
			cancel()
		}
	})
	s.b.writeMu.Unlock()
	if !errors.Is(err, context.Canceled) || puts >= n {
		t.Fatalf("cancelled after the first batch: %v after %d puts, want context.Canceled before %d", err, puts, n)
	}
	got, _ := entriesOf(t, s, loadTestKey)
	if len(got) != n {
		t.Fatalf("%d records loaded after a cancelled load, want %d", len(got), n)
	}
}
