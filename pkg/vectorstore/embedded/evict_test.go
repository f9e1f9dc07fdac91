package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const evictDims = 6

var (
	evictParts = []partKey{{"acme", "u1"}, {"acme", "u2"}, {"acme", "u3"}, {"globex", "u1"}, {"globex", "u2"}}
	evictWords = []string{"tea", "coffee", "paris", "train", "budget", "dog"}
)

// openEvicting opens a store at path that holds at most budget loaded records,
// gives every memory type a graph from annMin records on (negative: never),
// with searches as wide as the graphs, so that they answer as exact scans.
func openEvicting(t interface{ Fatal(...any) }, path string, budget, annMin, saveNodes int) *Store {
	s, err := New(Config{Path: path, Dimensions: evictDims, MaxLoadedRecords: budget, ANNThreshold: annMin, ANNBeam: 1 << 20, GraphSaveNodes: saveNodes}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkBound fails unless s holds at most budget loaded records, or one
// partition with records (the most recently read, which is kept whatever its
// size), and its own count of them is right.
func checkBound(t interface{ Fatalf(string, ...any) }, s *Store, budget int) {
	s.b.cacheMu.RLock()
	defer s.b.cacheMu.RUnlock()
	n, withRecords := 0, 0
	for _, p := range s.b.parts {
		n += p.live
		if p.live > 0 {
			withRecords++
		}
	}
	if n != s.b.loaded {
		t.Fatalf("the store counts %d loaded records, its partitions hold %d", s.b.loaded, n)
	}
	if n > budget && withRecords > 1 {
		t.Fatalf("%d records loaded in %d partitions, over the budget of %d", n, withRecords, budget)
	}
}

// Property: with a budget of a few records, so that nearly every read loads a
// partition and drops others, any sequence of writes (new and replaced
// records, payload and vector updates, deletes, erasures), reads and restarts
// across several partitions leaves every search, scroll and get answering
// exactly as a store that never evicts (the model: the same writes, in
// memory, every partition kept), scores to the bit; the loaded records stay
// within the budget throughout. With graphs (annMin ≥ 1) an evicted
// partition's graphs are saved and restored, and still answer exactly.
func TestPropertyEvictionKeepsEveryWrite(t *testing.T) {
	root := t.TempDir()
	var evictions int64
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp(root, "case")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "vectors.db")
		budget := rapid.IntRange(1, 8).Draw(t, "budget")
		annMin := rapid.SampledFrom([]int{-1, 1, 3}).Draw(t, "annMin")
		saveNodes := rapid.SampledFrom([]int{-1, 1, 7}).Draw(t, "saveNodes")
		s := openEvicting(t, path, budget, annMin, saveNodes)
		defer func() {
			evictions += s.Evictions()
			s.Close()
		}()
		model, err := New(Config{Path: MemoryPath, Dimensions: evictDims, ANNThreshold: -1, MaxLoadedRecords: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer model.Close()
		ctx := context.Background()
		part := rapid.SampledFrom(evictParts)
		vec := rapid.SliceOfN(rapid.SampledFrom([]float32{-1, 0, 0, 0.5, 1}), evictDims, evictDims)
		id := func(t *rapid.T) string {
			return vectorstore.DeterministicID("evict", fmt.Sprint(rapid.IntRange(0, 19).Draw(t, "id")))
		}
		text := func(t *rapid.T, label string) string {
			words := rapid.SliceOfN(rapid.SampledFrom(evictWords), 1, 4).Draw(t, label)
			out := words[0]
			for _, w := range words[1:] {
				out += " " + w
			}
			return out
		}
		both := func(t *rapid.T, what string, fn func(st *Store) (any, error)) {
			got, gotErr := fn(s)
			want, wantErr := fn(model)
			if (gotErr == nil) != (wantErr == nil) || errors.Is(gotErr, vectorstore.ErrConflict) != errors.Is(wantErr, vectorstore.ErrConflict) {
				t.Fatalf("%s: error %v, the model's %v", what, gotErr, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"upsert": func(t *rapid.T) {
				k := part.Draw(t, "part")
				var recs []vectorstore.Record
				for range rapid.IntRange(1, 4).Draw(t, "records") {
					recs = append(recs, vectorstore.Record{ID: id(t), Tenant: k.tenant, UserID: k.userID,
						MemoryType: rapid.SampledFrom(memoryTypes).Draw(t, "type"), Text: text(t, "text"), Vector: vec.Draw(t, "vector"),
						TS: time.UnixMicro(int64(1e15 + rapid.IntRange(0, 1000).Draw(t, "ts"))), Metadata: map[string]any{"n": rapid.IntRange(0, 3).Draw(t, "n")}})
				}
				both(t, "upsert", func(st *Store) (any, error) { return nil, st.Upsert(ctx, recs...) })
			},
			"update": func(t *rapid.T) {
				k := part.Draw(t, "part")
				patches := map[string]vectorstore.Patch{}
				for range rapid.IntRange(1, 3).Draw(t, "patches") {
					p := vectorstore.Patch{HitCountDelta: rapid.IntRange(-1, 2).Draw(t, "delta"), Metadata: map[string]any{"touched": true}}
					if rapid.Bool().Draw(t, "new vector") {
						p.Vector = vec.Draw(t, "patched vector")
					}
					patches[id(t)] = p
				}
				both(t, "update", func(st *Store) (any, error) { return st.UpdatePayloads(ctx, k.tenant, k.userID, patches) })
			},
			"delete": func(t *rapid.T) {
				k := part.Draw(t, "part")
				ids := []string{id(t), id(t)}
				both(t, "delete", func(st *Store) (any, error) { return st.Delete(ctx, k.tenant, k.userID, ids...) })
			},
			"erase": func(t *rapid.T) {
				k := part.Draw(t, "part")
				f := vectorstore.Filter{Tenant: k.tenant, UserID: k.userID, IncludeExpired: true}
				if rapid.Bool().Draw(t, "one type") {
					f.MemoryTypes = []vectorstore.MemoryType{rapid.SampledFrom(memoryTypes).Draw(t, "erased type")}
				}
				both(t, "erase", func(st *Store) (any, error) { return st.DeleteByFilter(ctx, f) })
			},
			"search": func(t *rapid.T) {
				k := part.Draw(t, "part")
				q := vectorstore.Query{Filter: vectorstore.Filter{Tenant: k.tenant, UserID: k.userID},
					Mode: rapid.SampledFrom([]vectorstore.Mode{vectorstore.Dense, vectorstore.Sparse, vectorstore.Hybrid}).Draw(t, "mode"),
					Text: text(t, "query"), Vector: vec.Draw(t, "query vector"), Limit: rapid.IntRange(1, 25).Draw(t, "limit")}
				if rapid.Bool().Draw(t, "by type") {
					q.Filter.MemoryTypes = []vectorstore.MemoryType{rapid.SampledFrom(memoryTypes).Draw(t, "searched type")}
				}
				both(t, "search", func(st *Store) (any, error) {
					hits, err := st.Search(ctx, q)
					return hitKeys(hits), err
				})
			},
			"scroll and get": func(t *rapid.T) {
				k := part.Draw(t, "part")
				f := vectorstore.Filter{Tenant: k.tenant, UserID: k.userID}
				both(t, "scroll", func(st *Store) (any, error) {
					recs, _, err := st.Scroll(ctx, f, "", 100)
					return recordKeys(recs), err
				})
				ids := []string{id(t), id(t)}
				both(t, "get", func(st *Store) (any, error) {
					recs, err := st.Get(ctx, k.tenant, k.userID, ids...)
					return recordKeys(recs), err
				})
			},
			"restart": func(t *rapid.T) {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				evictions += s.Evictions()
				s = openEvicting(t, path, budget, annMin, saveNodes)
			},
			"": func(t *rapid.T) { checkBound(t, s, budget) },
		})
	})
	if evictions == 0 {
		t.Fatal("no partition was evicted in any case")
	}
}

// recordKeys is each record as a string of every field, times as
// microseconds, the vector as bits.
func recordKeys(recs []vectorstore.Record) []string {
	var out []string
	for _, r := range recs {
		bits := make([]uint32, len(r.Vector))
		for i, f := range r.Vector {
			bits[i] = math.Float32bits(f)
		}
		meta, _ := json.Marshal(r.Metadata)
		out = append(out, fmt.Sprintf("%s %s/%s %s %q %d %d %v %v %s %x", r.ID, r.Tenant, r.UserID, r.MemoryType, r.Text,
			r.TS.UnixMicro(), r.HitCount, r.Confidence, r.ExpiresAt.IsZero(), meta, bits))
	}
	return out
}

// The loaded records stay within the budget, the least recently read
// partitions going first: which partitions are loaded after each read is the
// LRU order's, an evicted one comes back whole on its next read, a partition
// larger than the budget stays while it is the most recently read, and writes
// that grow the loaded partitions past the budget evict too.
func TestEvictionBoundsLoadedRecords(t *testing.T) {
	const perUser, budget = 100, 250
	path := filepath.Join(t.TempDir(), "vectors.db")
	s := openEvicting(t, path, budget, -1, -1)
	defer s.Close()
	ctx := context.Background()
	users := []string{"a", "b", "c", "d", "big"}
	for _, u := range users {
		n := perUser
		if u == "big" {
			n = 3 * perUser
		}
		var recs []vectorstore.Record
		for i := range n {
			recs = append(recs, vectorstore.Record{ID: vectorstore.DeterministicID(u, fmt.Sprint(i)), Tenant: "acme", UserID: u,
				MemoryType: vectorstore.Episodic, Text: "tea", Vector: []float32{1, 0, 0, 0, 0, 0}, TS: time.Unix(1, 0)})
		}
		if err := s.Upsert(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}
	loaded := func() []string {
		s.b.cacheMu.RLock()
		defer s.b.cacheMu.RUnlock()
		var out []string
		for k := range s.b.parts {
			out = append(out, k.userID)
		}
		slices.Sort(out)
		return out
	}
	read := func(u string, want int) {
		t.Helper()
		recs, _, err := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: u}, "", 1000)
		if err != nil || len(recs) != want {
			t.Fatalf("scroll of %s: %d records, %v; want %d", u, len(recs), err, want)
		}
		if n := s.LoadedRecords(); n > budget && len(loaded()) > 1 {
			t.Fatalf("after reading %s: %d records loaded (%v), budget %d", u, n, loaded(), budget)
		}
	}
	for _, step := range []struct {
		user string
		want []string // loaded after the read
	}{
		{"a", []string{"a"}},
		{"b", []string{"a", "b"}},
		{"c", []string{"b", "c"}}, // a, the least recently read, goes
		{"b", []string{"b", "c"}},
		{"d", []string{"b", "d"}}, // c is now the least recently read
		{"a", []string{"a", "d"}}, // a comes back whole
		{"big", []string{"big"}},  // larger than the budget alone: kept, every other one goes
		{"c", []string{"c"}},
	} {
		n := perUser
		if step.user == "big" {
			n = 3 * perUser
		}
		read(step.user, n)
		if got := loaded(); !slices.Equal(got, step.want) {
			t.Fatalf("after reading %s: loaded %v, want %v", step.user, got, step.want)
		}
	}
	read("d", perUser)
	// c and d are loaded (200); 60 more records in c (260) evict d, the
	// least recently read.
	var more []vectorstore.Record
	for i := range 60 {
		more = append(more, vectorstore.Record{ID: vectorstore.DeterministicID("c+", fmt.Sprint(i)), Tenant: "acme", UserID: "c",
			MemoryType: vectorstore.Episodic, Text: "tea", Vector: []float32{1, 0, 0, 0, 0, 0}, TS: time.Unix(1, 0)})
	}
	read("c", perUser)
	if err := s.Upsert(ctx, more...); err != nil {
		t.Fatal(err)
	}
	if got, want := loaded(), []string{"c"}; !slices.Equal(got, want) || s.LoadedRecords() != perUser+60 {
		t.Fatalf("after the write into c: loaded %v (%d records), want %v (%d)", got, s.LoadedRecords(), want, perUser+60)
	}
	if s.Evictions() == 0 {
		t.Fatal("no eviction counted")
	}
}

// A partition a reader has loaded but not read yet is not evicted under it,
// however recently others were read; once read, it is.
func TestEvictionSkipsPinnedPartitions(t *testing.T) {
	s := openEvicting(t, filepath.Join(t.TempDir(), "vectors.db"), 1, -1, -1)
	defer s.Close()
	ctx := context.Background()
	for _, u := range []string{"a", "b"} {
		r := vectorstore.Record{ID: vectorstore.DeterministicID(u), Tenant: "acme", UserID: u, MemoryType: vectorstore.Episodic,
			Text: "tea", Vector: []float32{1, 0, 0, 0, 0, 0}, TS: time.Unix(1, 0)}
		if err := s.Upsert(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.b.loadPartition(ctx, partKey{"acme", "a"}) // pinned, as read pins it
	if err != nil {
		t.Fatal(err)
	}
	partitionOf(t, s, partKey{"acme", "b"}, func(*partition) {}) // loads b, the newest; over the budget
	isLoaded := func(u string) bool {
		s.b.cacheMu.RLock()
		defer s.b.cacheMu.RUnlock()
		return s.b.parts[partKey{"acme", u}] != nil
	}
	if !isLoaded("a") || !isLoaded("b") {
		t.Fatalf("a loaded %v, b loaded %v: the pinned a must stay, and b is the most recently read", isLoaded("a"), isLoaded("b"))
	}
	a.pins.Add(-1)
	s.b.evict()
	if isLoaded("a") || !isLoaded("b") {
		t.Fatalf("once unpinned: a loaded %v, b loaded %v; want a (the least recently read) evicted", isLoaded("a"), isLoaded("b"))
	}
}

// An evicted partition's graphs are saved when it is dropped and come back
// with it: its next load restores them from the file, node for node, rather
// than building them again. An erasure after the eviction leaves no file.
func TestEvictionSavesTheGraphs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vectors.db")
	s := openEvicting(t, path, 1, 1, -1) // graph files only at close, or at eviction
	defer s.Close()
	ctx := context.Background()
	k := partKey{"acme", "a"}
	var recs []vectorstore.Record
	for i := range 40 {
		recs = append(recs, vectorstore.Record{ID: vectorstore.DeterministicID("g", fmt.Sprint(i)), Tenant: k.tenant, UserID: k.userID,
			MemoryType: vectorstore.Semantic, Text: "tea", Vector: loadTestVector(i)[:evictDims], TS: time.Unix(1, 0)})
	}
	other := vectorstore.Record{ID: vectorstore.DeterministicID("other"), Tenant: "acme", UserID: "b", MemoryType: vectorstore.Semantic,
		Text: "tea", Vector: []float32{1, 0, 0, 0, 0, 0}, TS: time.Unix(1, 0)}
	if err := s.Upsert(ctx, append(recs, other)...); err != nil {
		t.Fatal(err)
	}
	q := vectorstore.Query{Filter: vectorstore.Filter{Tenant: k.tenant, UserID: k.userID}, Vector: []float32{1, 1, 0, 0, 0, 0}, Mode: vectorstore.Dense, Limit: 5}
	before := hitStrings(t, s, q) // starts the graph
	waitIndexed(t, s, k)
	var shape *graphShape
	partitionOf(t, s, k, func(p *partition) { shape = shapeOf(p, typeSlot(vectorstore.Semantic)) })
	if shape == nil || len(shape.rids) != len(recs) {
		t.Fatalf("the graph holds %v, want %d nodes", shape, len(recs))
	}
	partitionOf(t, s, partKey{"acme", "b"}, func(*partition) {}) // evicts a
	if s.Evictions() != 1 {
		t.Fatalf("%d evictions, want 1", s.Evictions())
	}
	if _, err := os.Stat(graphFile(path, k)); err != nil {
		t.Fatalf("no graph file after the eviction: %v", err)
	}
	var again *graphShape
	partitionOf(t, s, k, func(p *partition) { again = shapeOf(p, typeSlot(vectorstore.Semantic)) }) // no search: only the file gives it a graph
	if shapeString(again) != shapeString(shape) {
		t.Fatalf("after the reload the graph is\n%s\nbefore the eviction it was\n%s", shapeString(again), shapeString(shape))
	}
	if got := hitStrings(t, s, q); !reflect.DeepEqual(got, before) {
		t.Fatalf("after the reload: %v, before: %v", got, before)
	}
	partitionOf(t, s, partKey{"acme", "b"}, func(*partition) {}) // evicts a again
	if _, err := s.DeleteByFilter(ctx, vectorstore.Filter{Tenant: k.tenant, UserID: k.userID, IncludeExpired: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(graphFile(path, k)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the erased partition's graph file: %v, want none", err)
	}
}

// Writers and readers of several partitions at once, with a budget that holds
// one partition, so that loads, evictions, graph building and saves run
// beside every write and read (run it with -race): every read sees each
// record its own goroutine wrote before it, as last written, and afterwards
// every partition holds exactly what was written.
func TestEvictionUnderConcurrentReadersAndWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vectors.db")
	s := openEvicting(t, path, 1, 2, 3)
	defer s.Close()
	ctx := context.Background()
	const writers, rounds = 4, 40
	users := []string{"u0", "u1", "u2"}
	var (
		wg     sync.WaitGroup
		failed atomic.Value
		final  sync.Map // id → text
	)
	fail := func(err error) { failed.CompareAndSwap(nil, err) }
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				u := users[(w+i)%len(users)]
				id := vectorstore.DeterministicID(fmt.Sprint(w), fmt.Sprint(i%7))
				text := fmt.Sprintf("tea w%d r%d", w, i)
				r := vectorstore.Record{ID: id, Tenant: "acme", UserID: "w" + fmt.Sprint(w), MemoryType: memoryTypes[i%3],
					Text: text, Vector: loadTestVector(i)[:evictDims], TS: time.Unix(int64(i), 0)}
				if err := s.Upsert(ctx, r); err != nil {
					fail(err)
					return
				}
				final.Store(id, text)
				got, err := s.Get(ctx, "acme", r.UserID, id)
				if err != nil || len(got) != 1 || got[0].Text != text {
					fail(fmt.Errorf("writer %d read back %v (%v), want its write %q", w, got, err, text))
					return
				}
				// Reads of the shared users, to keep the others' partitions coming and going.
				if _, err := s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: u},
					Vector: loadTestVector(i)[:evictDims], Text: "tea", Mode: vectorstore.Hybrid, Limit: 3}); err != nil {
					fail(err)
					return
				}
				if i%10 == 9 {
					if _, err := s.Delete(ctx, "acme", r.UserID, id); err != nil {
						fail(err)
						return
					}
					final.Delete(id)
				}
			}
		})
	}
	for _, u := range users {
		r := vectorstore.Record{ID: vectorstore.DeterministicID("shared", u), Tenant: "acme", UserID: u, MemoryType: vectorstore.Semantic,
			Text: "tea shared", Vector: loadTestVector(1)[:evictDims], TS: time.Unix(1, 0)}
		if err := s.Upsert(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		recs, _, err := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: "w" + fmt.Sprint(w)}, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range recs {
			got[r.ID] = r.Text
		}
		want := map[string]string{}
		for i := range 7 {
			id := vectorstore.DeterministicID(fmt.Sprint(w), fmt.Sprint(i))
			if text, ok := final.Load(id); ok {
				want[id] = text.(string)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("writer %d's partition holds %v, want %v", w, got, want)
		}
	}
	if s.Evictions() == 0 {
		t.Fatal("no eviction happened")
	}
}
