package embedded

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// scratch is scores' accumulators, kept (zeroed) from one call to the next as
// the search before pruning kept them, so that BenchmarkSparseRanking compares
// the two walks rather than an allocation.
type scratch struct {
	score   []float64
	touched []int32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// scores is the sparse search before pruning, the reference topScores must
// agree with: it calls fn with every live doc holding a query term and its BM25
// score, each term's part times its weight, in no particular order. query is
// distinct terms (queryTerms). alive reports whether a doc is live.
func (x *lexIndex) scores(query []vectorstore.WeightedTerm, alive func(int32) bool, fn func(doc int32, score float64)) {
	if x.live == 0 {
		return
	}
	p := bm25.DefaultParams()
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	if len(sc.score) < len(x.docLen) {
		sc.score = make([]float64, len(x.docLen))
	}
	score := sc.score
	n := float64(x.live)
	avgLen := float64(x.total) / n
	for _, wt := range query {
		df := x.terms[wt.Term].df
		if df == 0 {
			continue
		}
		idf := idf(n, df)
		for _, ps := range x.postings[wt.Term] {
			if !alive(ps.doc) {
				continue
			}
			if score[ps.doc] == 0 {
				sc.touched = append(sc.touched, ps.doc)
			}
			score[ps.doc] += bm25Part(p, idf, avgLen, x.docLen[ps.doc], ps.tf, wt.Weight)
		}
	}
	for _, d := range sc.touched {
		fn(d, score[d])
		score[d] = 0
	}
	sc.touched = sc.touched[:0]
}

// exhaustiveRanking is sparseRanking without pruning: every live posting of
// every query term scored (lexIndex.scores), then the best depth kept.
func exhaustiveRanking(p *partition, terms []vectorstore.WeightedTerm, m *matcher, depth int) []ranked {
	var all []ranked
	p.lex.scores(terms, func(d int32) bool { return p.kinds[d] != deadKind }, func(d int32, sc float64) {
		if sc > 0 && m.kinds[p.kinds[d]] && m.match(p.docs[d]) && (m.ids == nil || slices.Contains(m.ids, p.docs[d].rec.ID)) {
			all = append(all, ranked{p.docs[d].rid, d, sc})
		}
	})
	return best(all, depth)
}

// The pruned sparse ranking (MaxScore, lexIndex.topScores) returns exactly what
// scoring every posting returns: the same records, bit-identical scores, ties
// in the same order, for any corpus after puts and removes (dead postings), any
// memory-type, chat or id filter, any weighted query with expansion terms and
// any depth. Few words and short texts make equal scores common.
func TestPropertyTopScoresExact(t *testing.T) {
	words := []string{"sales", "column", "chart", "dark", "theme", "error", "file", "tea", "morning", "python", "guitar", "piano"}
	weight := rapid.OneOf(rapid.Just(1.0), rapid.Just(0.3), rapid.Float64Range(1e-6, 1))
	rapid.Check(t, func(t *rapid.T) {
		p := newPartition(partKey{"acme", "u1"}, 0)
		nOps := rapid.IntRange(1, 400).Draw(t, "ops")
		for range nOps {
			rid := int64(rapid.IntRange(1, 120).Draw(t, "rid"))
			if rapid.IntRange(0, 4).Draw(t, "op") == 0 {
				p.remove(rid)
				continue
			}
			ws := rapid.SliceOfN(rapid.SampledFrom(words), 0, 8).Draw(t, "text")
			rec := vectorstore.Record{
				ID: vectorstore.DeterministicID(strconv.FormatInt(rid, 10)), MemoryType: rapid.SampledFrom(memoryTypes).Draw(t, "type"),
				Text: strings.Join(ws, " "), Vector: []float32{1}, ChatID: rapid.SampledFrom([]string{"c1", "c2"}).Draw(t, "chat"),
			}
			p.put(newEntryNormalized(rid, rec, ""))
		}
		f := vectorstore.Filter{IncludeExpired: true}
		if rapid.Bool().Draw(t, "byType") {
			f.MemoryTypes = rapid.SliceOfNDistinct(rapid.SampledFrom(memoryTypes), 1, 2, func(m vectorstore.MemoryType) vectorstore.MemoryType { return m }).Draw(t, "types")
		}
		if rapid.Bool().Draw(t, "byChat") {
			f.ChatID = "c1"
		}
		if rapid.IntRange(0, 4).Draw(t, "byIDs") == 0 {
			for _, rid := range rapid.SliceOfN(rapid.IntRange(1, 120), 1, 30).Draw(t, "ids") {
				f.IDs = append(f.IDs, vectorstore.DeterministicID(strconv.Itoa(rid)))
			}
		}
		m := newMatcher(f, time.Time{})
		text := bm25.Tokenize(strings.Join(rapid.SliceOfN(rapid.SampledFrom(words), 0, 5).Draw(t, "query"), " "))
		var exp []vectorstore.WeightedTerm
		for _, w := range rapid.SliceOfN(rapid.SampledFrom(append(words, "absent")), 0, 6).Draw(t, "expansion") {
			exp = append(exp, vectorstore.WeightedTerm{Term: w, Weight: weight.Draw(t, "weight")})
		}
		terms := queryTerms(text, exp)
		depth := rapid.IntRange(1, 40).Draw(t, "depth")
		got, want := sparseRanking(p, terms, m, depth), exhaustiveRanking(p, terms, m, depth)
		if len(got) != len(want) {
			t.Fatalf("pruned ranking has %d records, exhaustive %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("rank %d: pruned %+v, exhaustive %+v", i, got[i], want[i])
			}
		}
	})
}

// BenchmarkSparseRanking ranks one memory type's best 100 in a partition of
// 100,000 records of two types (Zipf words, as BenchmarkEmbeddedSearch's text)
// for 6-word queries: pruned is sparseRanking, exhaustive the same ranking
// offered every posting's doc (lexIndex.scores).
func BenchmarkSparseRanking(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	zipf := rand.NewZipf(r, 1.1, 1, 2999)
	sentence := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = "word" + strconv.FormatUint(zipf.Uint64(), 10)
		}
		return strings.Join(w, " ")
	}
	p := newPartition(partKey{"acme", "u1"}, 0)
	for rid := range int64(100_000) {
		rec := vectorstore.Record{ID: vectorstore.DeterministicID(strconv.FormatInt(rid, 10)), MemoryType: memoryTypes[rid%2], Text: sentence(12), Vector: []float32{1}}
		p.put(newEntryNormalized(rid, rec, ""))
	}
	queries := make([][]vectorstore.WeightedTerm, 64)
	for i := range queries {
		queries[i] = queryTerms(bm25.Tokenize(sentence(6)), nil)
	}
	m := newMatcher(vectorstore.Filter{MemoryTypes: memoryTypes[:1], IncludeExpired: true}, time.Time{})
	for _, c := range []struct {
		name string
		rank func(*partition, []vectorstore.WeightedTerm, *matcher, int) []ranked
	}{{"pruned", sparseRanking}, {"exhaustive", func(p *partition, terms []vectorstore.WeightedTerm, m *matcher, depth int) []ranked {
		return rankSparse(p, terms, m, depth, func(q []vectorstore.WeightedTerm, alive func(int32) bool, _ func() float64, fn func(int32, float64)) {
			p.lex.scores(q, alive, fn)
		})
	}}} {
		for _, depth := range []int{10, 100} {
			b.Run(fmt.Sprintf("%s-depth%d", c.name, depth), func(b *testing.B) {
				i := 0
				for b.Loop() {
					c.rank(p, queries[i%len(queries)], m, depth)
					i++
				}
			})
		}
	}
}
