package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const graphTestDims = 6

var graphTestKey = partKey{"acme", "u1"}

// openGraphStore opens a store at path whose every memory type gets a graph
// from annMin records on and whose graph searches are as wide as the graphs.
func openGraphStore(t interface{ Fatal(...any) }, path string, annMin, saveNodes int) *Store {
	s, err := New(Config{Path: path, Dimensions: graphTestDims, ANNThreshold: annMin, ANNBeam: 1 << 20, GraphSaveNodes: saveNodes}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// partitionOf runs fn on the loaded partition of k (loading it without a
// search, so no graph starts).
func partitionOf(t interface{ Fatal(...any) }, s *Store, k partKey, fn func(p *partition)) {
	err := s.b.read(context.Background(), k, func(p *partition) error {
		fn(p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitIndexed polls until the indexer has caught up with every graph of k.
func waitIndexed(t interface{ Fatal(...any) }, s *Store, k partKey) {
	for deadline := time.Now().Add(10 * time.Second); ; {
		behind := false
		partitionOf(t, s, k, func(p *partition) { behind = p.indexBehind() })
		if !behind {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the indexer did not catch up in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// graphShape is a graph in terms that survive a restart: rids rather than
// docs (−1 for a dead doc), with its links, levels, entry and random state.
type graphShape struct {
	rids   []int64
	levels []uint8
	links  [][][]int32
	entry  int32
	top    int
	rng    string
	upto   int64 // the rid-order position: docs below it, as rids
	vecsOK bool  // every live node's vector is its doc's
}

func shapeOf(p *partition, t int) *graphShape {
	a := p.ann[t].Load()
	if a == nil || a.g.len() == 0 {
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	g := a.g
	rng, _ := g.src.MarshalBinary()
	sh := &graphShape{entry: g.entry, top: g.top, rng: string(rng), levels: slices.Clone(g.levels), upto: int64(a.upto), vecsOK: true}
	for n, d := range g.docs {
		rid := int64(-1)
		if e := p.docs[d]; e != nil {
			rid = e.rid
			sh.vecsOK = sh.vecsOK && slices.Equal(g.vecs[n], e.rec.Vector)
		}
		sh.rids = append(sh.rids, rid)
		var ls [][]int32
		for l := range int(g.levels[n]) + 1 {
			ls = append(ls, slices.Clone(g.neighbours(int32(n), l)))
		}
		sh.links = append(sh.links, ls)
	}
	return sh
}

// After any sequence of writes (new records, changed vectors and types,
// deletes), dense searches (which start the graphs), restarts, and restarts
// with a graph file older than the writes since (a crash after the last save),
// a dense search as wide as the graphs returns exactly what an exact scan of
// the records present returns. A restart right after a clean close finds every
// graph as it was: the same nodes (by rid), links, levels, entry and random
// state, each live node with its record's vector, loaded from the graph file
// with no search to start it.
func TestPropertyGraphFilesSurviveRestarts(t *testing.T) {
	root := t.TempDir()
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		dir := filepath.Join(root, fmt.Sprint(run))
		path := filepath.Join(dir, "vectors.db")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		annMin := rapid.IntRange(1, 6).Draw(t, "annMin")
		saveNodes := rapid.SampledFrom([]int{-1, 1, 7}).Draw(t, "saveNodes")
		s := openGraphStore(t, path, annMin, saveNodes)
		defer func() { s.Close() }()
		ctx := context.Background()
		model := map[string]vectorstore.Record{}
		vec := func(label string) []float32 {
			return rapid.SliceOfN(rapid.SampledFrom([]float32{-1, 0, 0, 0.5, 1}), graphTestDims, graphTestDims).Draw(t, label)
		}
		stale := "" // a copy of the graph file as of an earlier close
		file := graphFile(path, graphTestKey)
		search := func(q []float32) {
			_, err := s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Vector: q, Mode: vectorstore.Dense, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
		}
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			id := vectorstore.DeterministicID("graph", fmt.Sprint(rapid.IntRange(0, 24).Draw(t, "id")))
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op <= 4:
				r := vectorstore.Record{ID: id, Tenant: "acme", UserID: "u1", MemoryType: rapid.SampledFrom(memoryTypes).Draw(t, "type"),
					Text: "tea", Vector: vec("vector"), TS: time.Unix(1, 0)}
				if err := s.Upsert(ctx, r); err != nil {
					t.Fatal(err)
				}
				model[id] = r
			case op == 5:
				if _, err := s.Delete(ctx, "acme", "u1", id); err != nil {
					t.Fatal(err)
				}
				delete(model, id)
			case op == 6:
				search(vec("q"))
			case op == 7 && len(model) > 0:
				// A clean restart: every graph comes back as it was.
				waitIndexed(t, s, graphTestKey)
				var before [indexKinds]*graphShape
				partitionOf(t, s, graphTestKey, func(p *partition) {
					for k := range indexKinds {
						before[k] = shapeOf(p, k)
					}
				})
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if data, err := os.ReadFile(file); err == nil {
					stale = string(data)
				}
				s = openGraphStore(t, path, annMin, saveNodes)
				partitionOf(t, s, graphTestKey, func(p *partition) {
					for k := range indexKinds {
						after := shapeOf(p, k)
						if before[k] != nil && after != nil && !after.vecsOK {
							t.Fatalf("slot %d: a live node's vector is not its record's", k)
						}
						if before[k] != nil && after != nil {
							after.vecsOK = true
						}
						if shapeString(after) != shapeString(before[k]) {
							t.Fatalf("slot %d: after the restart the graph is\n%s\nbefore it was\n%s", k, shapeString(after), shapeString(before[k]))
						}
					}
				})
			case op == 8 && stale != "":
				// A crash after writes the graph file has not seen: the file
				// of the last clean close is what is on disk.
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(stale), 0o600); err != nil {
					t.Fatal(err)
				}
				s = openGraphStore(t, path, annMin, saveNodes)
			}
		}
		q := vec("query")
		depth := rapid.IntRange(1, 30).Draw(t, "depth")
		types := rapid.SliceOfNDistinct(rapid.SampledFrom(memoryTypes), 0, 3, rapid.ID).Draw(t, "types")
		var got, want []ranked
		partitionOf(t, s, graphTestKey, func(p *partition) {
			if p.live != len(model) {
				t.Fatalf("the partition holds %d records, want %d", p.live, len(model))
			}
			m := newMatcher(vectorstore.Filter{MemoryTypes: types, IncludeExpired: true}, time.Time{})
			got, _ = denseRanking(p, embedUnit(q), m, depth, len(p.docs))
			top := newTopK(depth)
			for id, r := range model {
				if len(types) > 0 && !slices.Contains(types, r.MemoryType) {
					continue
				}
				e := p.docs[p.byID[id]]
				top.offer(ranked{e.rid, 0, float64(dot(embedUnit(q), embedUnit(r.Vector)))})
			}
			want = top.sorted()
			// Every record's text is "tea": a keyword search ties them all, so
			// it returns the smallest rids, each from its own doc.
			var rids []int64
			for id, r := range model {
				if len(types) == 0 || slices.Contains(types, r.MemoryType) {
					rids = append(rids, p.docs[p.byID[id]].rid)
				}
			}
			slices.Sort(rids)
			sparse := sparseRanking(p, queryTerms([]string{"tea"}, nil), m, depth)
			for i, h := range sparse {
				if e := p.docs[h.doc]; e == nil || e.rid != h.rid || i >= len(rids) || h.rid != rids[i] {
					t.Fatalf("keyword hit %d: rid %d from doc %d; want rid %v, its own doc's", i, h.rid, h.doc, rids[min(i, len(rids)-1)])
				}
			}
			if len(sparse) != min(depth, len(rids)) {
				t.Fatalf("%d keyword hits, want %d", len(sparse), min(depth, len(rids)))
			}
		})
		if len(got) != len(want) {
			t.Fatalf("got %d hits, want %d", len(got), len(want))
		}
		for i := range got {
			if got[i].rid != want[i].rid || got[i].score != want[i].score {
				t.Fatalf("hit %d: got rid %d score %v, want rid %d score %v", i, got[i].rid, got[i].score, want[i].rid, want[i].score)
			}
		}
	})
}

// embedUnit is v normalised as the store normalises it, in a fresh slice.
func embedUnit(v []float32) []float32 {
	v = slices.Clone(v)
	embed.Normalize(v)
	return v
}

func shapeString(g *graphShape) string {
	if g == nil {
		return "no graph"
	}
	return fmt.Sprintf("%+v", *g)
}

// graphFilePartition is a partition of n records over the three memory types,
// its graphs built, and its records as a load would read them again.
func graphFilePartition(n int) (*partition, []*entry) {
	p := newPartition(graphTestKey, 1)
	var recs []*entry
	for i := range n {
		v := make([]float32, graphTestDims)
		v[i%graphTestDims], v[(i*7+1)%graphTestDims] = 1, float32(i%5)/4
		r := vectorstore.Record{ID: vectorstore.DeterministicID("g", fmt.Sprint(i)), MemoryType: memoryTypes[i%3], Text: "tea", Vector: v}
		e := newEntry(int64(i+1), r, "")
		p.put(e)
		recs = append(recs, newEntry(int64(i+1), r, ""))
	}
	for t := range indexKinds {
		p.ann[t].Store(&annIndex{g: newHNSW()})
	}
	for vs := new(visitSet); p.indexSome(vs); {
	}
	return p, recs
}

// A graph file that is damaged anywhere (the checksum), truncated, or of
// another partition or dimension is refused with ErrGraphFile.
func TestGraphFileRefusesDamage(t *testing.T) {
	p, _ := graphFilePartition(40)
	data := p.encodeGraphs(graphTestDims)
	if _, err := decodeGraphs(data, graphTestKey, graphTestDims); err != nil {
		t.Fatalf("the file as written: %v", err)
	}
	cases := map[string]func() error{
		"a byte flipped": func() error {
			d := slices.Clone(data)
			d[len(d)/2] ^= 1
			_, err := decodeGraphs(d, graphTestKey, graphTestDims)
			return err
		},
		"truncated": func() error {
			_, err := decodeGraphs(data[:len(data)-9], graphTestKey, graphTestDims)
			return err
		},
		"another user": func() error {
			_, err := decodeGraphs(data, partKey{"acme", "u2"}, graphTestDims)
			return err
		},
		"other dimensions": func() error {
			_, err := decodeGraphs(data, graphTestKey, graphTestDims+1)
			return err
		},
	}
	for name, decode := range cases {
		if err := decode(); !errors.Is(err, ErrGraphFile) {
			t.Errorf("%s: got %v, want ErrGraphFile", name, err)
		}
	}
}

// Whatever a graph file holds, decoding it never panics, and a file that
// decodes restores a partition whose widest dense search returns only live
// records, each once. The input is a file's body: its checksum is appended,
// so the fuzzer reaches the parser rather than the checksum's refusal.
func FuzzDecodeGraphs(f *testing.F) {
	p, recs := graphFilePartition(30)
	file := p.encodeGraphs(graphTestDims)
	f.Add(file[:len(file)-4])
	f.Fuzz(func(t *testing.T, body []byte) {
		data := binary.LittleEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, crcTable))
		snap, err := decodeGraphs(data, graphTestKey, graphTestDims)
		if err != nil {
			return
		}
		fresh := make([]*entry, len(recs))
		for i, e := range recs {
			fresh[i] = newEntryNormalized(e.rid, e.rec, "")
		}
		q := newPartition(graphTestKey, 1)
		q.restore(snap, fresh, graphTestDims)
		got, _ := denseRanking(q, embedUnit([]float32{1, 0.5, 0, 0, 0.25, 0}), newMatcher(vectorstore.Filter{IncludeExpired: true}, time.Time{}), 100, 1<<20)
		seen := map[int64]bool{}
		for _, r := range got {
			if q.docs[r.doc] == nil || q.docs[r.doc].rid != r.rid || seen[r.rid] {
				t.Fatalf("hit rid %d doc %d: dead, another record's, or twice", r.rid, r.doc)
			}
			seen[r.rid] = true
		}
	})
}

// An erasure (DeleteByFilter of a user) removes the user's graph file, and the
// temporary one a crash may have left, at once and for good: not written again
// at Close nor there after a restart. The other user's file stays and is
// loaded again.
func TestEraseRemovesTheGraphFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vectors.db")
	ctx := context.Background()
	s := openGraphStore(t, path, 1, -1)
	defer func() { s.Close() }()
	users := []string{"u1", "u2"}
	for _, u := range users {
		for i := range 20 {
			v := make([]float32, graphTestDims)
			v[i%graphTestDims] = 1
			r := vectorstore.Record{ID: vectorstore.DeterministicID(u, fmt.Sprint(i)), Tenant: "acme", UserID: u, MemoryType: vectorstore.Episodic, Text: "tea", Vector: v, TS: time.Unix(1, 0)}
			if err := s.Upsert(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: u}, Vector: []float32{1, 0, 0, 0, 0, 0}, Mode: vectorstore.Dense, Limit: 1}); err != nil {
			t.Fatal(err)
		}
		waitIndexed(t, s, partKey{"acme", u})
	}
	reopen := func() {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openGraphStore(t, path, 1, -1)
	}
	reopen()
	file := func(u string) string { return graphFile(path, partKey{"acme", u}) }
	for _, u := range users {
		if _, err := os.Stat(file(u)); err != nil {
			t.Fatalf("%s's graph file after Close: %v; the test would prove nothing", u, err)
		}
	}
	if err := os.WriteFile(file("u1")+".tmp", []byte("left by a crash"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Loaded, so that Close would write its graphs if it kept any.
	partitionOf(t, s, partKey{"acme", "u1"}, func(*partition) {})
	if n, err := s.DeleteByFilter(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"}); err != nil || n != 20 {
		t.Fatalf("DeleteByFilter = %d, %v", n, err)
	}
	gone := func(when string) {
		t.Helper()
		for _, f := range []string{file("u1"), file("u1") + ".tmp"} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s: %s is still there", when, filepath.Base(f))
			}
		}
	}
	gone("after the erasure")
	reopen()
	gone("after a restart")
	err := s.b.read(ctx, partKey{"acme", "u2"}, func(p *partition) error {
		if a := p.ann[0].Load(); a == nil || a.g.len() == 0 {
			t.Error("u2's graph was not loaded from its file after the erasure of u1")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
