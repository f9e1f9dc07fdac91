package embedded

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func TestIndexKinds(t *testing.T) {
	if indexKinds != len(memoryTypes) {
		t.Fatalf("indexKinds = %d, want len(memoryTypes) = %d", indexKinds, len(memoryTypes))
	}
}

// After any sequence of writes (new records, text, type and vector changes,
// payload updates that keep the vector, removes, with the compactions they cause)
// with the graphs started by searches from a few records on and the indexer
// having caught up any part of the way, a dense search with a beam as wide as the graphs returns
// exactly what an exact scan of the live records returns: deleted and replaced
// records never come back, changed vectors score with their new values, and no
// live record is out of the graph's reach.
func TestPropertyANNMatchesExactSearch(t *testing.T) {
	const dims = 6
	rapid.Check(t, func(t *rapid.T) {
		p := newPartition(partKey{"acme", "u1"}, rapid.IntRange(1, 8).Draw(t, "annMin"))
		live := map[int64]*entry{}
		vec := func(label string) []float32 {
			// Few distinct coordinates, so equal scores (ties) are common.
			v := rapid.SliceOfN(rapid.SampledFrom([]float32{-1, 0, 0, 0.5, 1}), dims, dims).Draw(t, label)
			embed.Normalize(v)
			return v
		}
		vs := new(visitSet)
		for range rapid.IntRange(1, 300).Draw(t, "ops") {
			rid := int64(rapid.IntRange(1, 40).Draw(t, "rid"))
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0:
				p.remove(rid)
				delete(live, rid)
			case 1:
				// A payload update: the cached vector itself, kept.
				if old, ok := live[rid]; ok {
					e := newEntryNormalized(rid, old.rec, "{}")
					p.put(e)
					live[rid] = e
				}
			case 5:
				// A search gives the types with annMin records a graph.
				denseRanking(p, vec("q"), newMatcher(vectorstore.Filter{IncludeExpired: true}, time.Time{}), 1, 1)
			case 2:
				for range rapid.IntRange(0, 20).Draw(t, "steps") {
					p.indexSome(vs)
				}
			default:
				rec := vectorstore.Record{ID: vectorstore.DeterministicID(string(rune('a' + rid))),
					MemoryType: rapid.SampledFrom(memoryTypes).Draw(t, "type"),
					Text:       rapid.SampledFrom([]string{"tea", "coffee"}).Draw(t, "text"), Vector: vec("vector")}
				e := newEntryNormalized(rid, rec, "")
				p.put(e)
				live[rid] = e
			}
		}
		types := rapid.SliceOfNDistinct(rapid.SampledFrom(memoryTypes), 0, 3, rapid.ID).Draw(t, "qtypes")
		m := newMatcher(vectorstore.Filter{MemoryTypes: types, IncludeExpired: true}, time.Time{})
		q := vec("query")
		depth := rapid.IntRange(1, 50).Draw(t, "depth")
		got, _ := denseRanking(p, q, m, depth, len(p.docs))
		want := newTopK(depth)
		for rid, e := range live {
			if len(types) == 0 || slices.Contains(types, e.rec.MemoryType) {
				want.offer(ranked{rid, 0, float64(dot(q, e.rec.Vector))})
			}
		}
		exp := want.sorted()
		if len(got) != len(exp) {
			t.Fatalf("got %d hits, want %d", len(got), len(exp))
		}
		for i := range got {
			if got[i].rid != exp[i].rid || got[i].score != exp[i].score {
				t.Fatalf("hit %d: got rid %d score %v, want rid %d score %v", i, got[i].rid, got[i].score, exp[i].rid, exp[i].score)
			}
			if e := p.docs[got[i].doc]; e == nil || e.rid != got[i].rid {
				t.Fatalf("hit %d: doc %d is not rid %d", i, got[i].doc, got[i].rid)
			}
		}
	})
}
