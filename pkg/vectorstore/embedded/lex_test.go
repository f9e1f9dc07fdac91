package embedded

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// After any sequence of puts (new records, text changes, type changes, payload
// updates) and removes, the partition's incremental BM25 index scores every live
// record exactly as pkg/bm25 does over the live records, a sparse search returns
// only live records of the filtered type, and the id orders hold exactly the live
// records.
func TestPropertyLexMatchesBM25(t *testing.T) {
	words := []string{"sales", "column", "chart", "dark", "theme", "error", "file", "tea", "morning", "python"}
	rapid.Check(t, func(t *rapid.T) {
		p := newPartition(partKey{"acme", "u1"}, 0)
		live := map[int64]*entry{}
		nOps := rapid.IntRange(1, 300).Draw(t, "ops")
		for range nOps {
			rid := int64(rapid.IntRange(1, 40).Draw(t, "rid"))
			if rapid.IntRange(0, 3).Draw(t, "op") == 0 {
				p.remove(rid)
				delete(live, rid)
				continue
			}
			n := rapid.IntRange(0, 6).Draw(t, "len")
			ws := make([]string, n)
			for i := range ws {
				ws[i] = rapid.SampledFrom(words).Draw(t, "word")
			}
			typ := rapid.SampledFrom(memoryTypes).Draw(t, "type")
			e := newEntryNormalized(rid, vectorstore.Record{ID: vectorstore.DeterministicID(string(rune('a' + rid))), MemoryType: typ, Text: strings.Join(ws, " "), Vector: []float32{1}}, "")
			p.put(e)
			live[rid] = e
		}
		if p.live != len(live) {
			t.Fatalf("live = %d, want %d", p.live, len(live))
		}
		var docs [][]string
		var rids []int64
		for rid, e := range live {
			docs = append(docs, bm25.Tokenize(e.rec.Text))
			rids = append(rids, rid)
		}
		ix := bm25.NewIndex(docs, bm25.DefaultParams())
		query := bm25.Tokenize(strings.Join(rapid.SliceOfN(rapid.SampledFrom(words), 1, 4).Draw(t, "query"), " "))
		typ := rapid.SampledFrom(memoryTypes).Draw(t, "qtype")
		got := sparseRanking(p, queryTerms(query, nil), newMatcher(vectorstore.Filter{MemoryTypes: []vectorstore.MemoryType{typ}, IncludeExpired: true}, time.Time{}), 1000)
		want := map[int64]float64{}
		for i, rid := range rids {
			if sc := ix.Score(query, i); sc > 0 && live[rid].rec.MemoryType == typ {
				want[rid] = sc
			}
		}
		if len(got) != len(want) {
			t.Fatalf("sparse search found %d records, want %d", len(got), len(want))
		}
		for _, r := range got {
			if w, ok := want[r.rid]; !ok || w != r.score {
				t.Fatalf("rid %d scored %v, bm25 gives %v (found %v)", r.rid, r.score, w, ok)
			}
			if p.docs[r.doc] == nil || p.docs[r.doc].rid != r.rid {
				t.Fatalf("rid %d returned with a dead or foreign doc", r.rid)
			}
		}
		order := p.sorted(len(memoryTypes))
		if len(order) != len(live) {
			t.Fatalf("id order holds %d, want %d", len(order), len(live))
		}
		for _, rid := range order {
			if live[rid] == nil {
				t.Fatalf("id order holds removed rid %d", rid)
			}
		}
	})
}
