package embedded

import (
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// lexIndex is a partition's inverted BM25 index, kept up to date by every write
// instead of rebuilt after one: before, the first search after any write to a
// partition tokenized and indexed all of it again (tens of milliseconds at
// 100,000 records, on the request path), and every search scored and matched
// every record. Scores equal pkg/bm25's bit for bit (same formula, same order of
// additions; TestPropertyLexMatchesBM25), with the partition's live records as
// the corpus.
type lexIndex struct {
	postings map[string][]lexPosting // ascending doc; may hold dead docs (partition.compact drops them)
	df       map[string]int32        // live docs per term
	docLen   []int32                 // by doc
	total    int64                   // tokens of the live docs
	live     int
}

type lexPosting struct{ doc, tf int32 }

func newLexIndex() lexIndex {
	return lexIndex{postings: make(map[string][]lexPosting), df: make(map[string]int32)}
}

// termCounts calls fn with each distinct term of terms (space-joined) and its
// count, in first-seen order.
func termCounts(terms string, fn func(term string, n int32)) int32 {
	toks := strings.Fields(terms)
	slices.Sort(toks)
	for i := 0; i < len(toks); {
		j := i + 1
		for j < len(toks) && toks[j] == toks[i] {
			j++
		}
		fn(toks[i], int32(j-i))
		i = j
	}
	return int32(len(toks))
}

// add indexes doc, the newest doc number, with its terms.
func (x *lexIndex) add(doc int32, terms string) {
	n := termCounts(terms, func(t string, tf int32) {
		x.postings[t] = append(x.postings[t], lexPosting{doc, tf})
		x.df[t]++
	})
	for int(doc) >= len(x.docLen) {
		x.docLen = append(x.docLen, 0)
	}
	x.docLen[doc] = n
	x.total += int64(n)
	x.live++
}

// remove takes doc, indexed with terms, out of the statistics; its postings stay
// until the partition compacts, and searches skip them.
func (x *lexIndex) remove(doc int32, terms string) {
	termCounts(terms, func(t string, _ int32) {
		if x.df[t]--; x.df[t] <= 0 {
			delete(x.df, t)
			delete(x.postings, t) // every posting left is dead
		}
	})
	x.total -= int64(x.docLen[doc])
	x.live--
}

// lexScratch accumulates one search's scores by doc; pooled so that a search
// allocates nothing in proportion to the partition.
type lexScratch struct {
	score   []float64
	touched []int32
}

var lexPool = sync.Pool{New: func() any { return new(lexScratch) }}

// scores calls fn with every live doc holding a query term and its BM25 score,
// each term's part times its weight, in no particular order. query is distinct
// terms (queryTerms). alive reports whether a doc is live.
func (x *lexIndex) scores(query []vectorstore.WeightedTerm, alive func(int32) bool, fn func(doc int32, score float64)) {
	if x.live == 0 {
		return
	}
	p := bm25.DefaultParams()
	sc := lexPool.Get().(*lexScratch)
	defer lexPool.Put(sc)
	if len(sc.score) < len(x.docLen) {
		sc.score = make([]float64, len(x.docLen)+len(x.docLen)/4)
	}
	n := float64(x.live)
	avgLen := float64(x.total) / n
	for _, wt := range query {
		term := wt.Term
		df := x.df[term]
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
		for _, ps := range x.postings[term] {
			if !alive(ps.doc) {
				continue
			}
			norm := 1.0
			if avgLen > 0 {
				norm = 1 - p.B + p.B*float64(x.docLen[ps.doc])/avgLen
			}
			f := float64(ps.tf)
			if sc.score[ps.doc] == 0 {
				sc.touched = append(sc.touched, ps.doc)
			}
			// × 1 is exact, so a query without expansion scores as pkg/bm25 does.
			sc.score[ps.doc] += float64(idf*(f*(p.K1+1)/(f+p.K1*norm))) * wt.Weight
		}
	}
	for _, d := range sc.touched {
		fn(d, sc.score[d])
		sc.score[d] = 0
	}
	sc.touched = sc.touched[:0]
}

// queryTerms returns the text's terms without repeats, in first-seen order (as
// pkg/bm25 sums them), at weight 1, then the expansion's terms the text lacks.
func queryTerms(text []string, expansion []vectorstore.WeightedTerm) []vectorstore.WeightedTerm {
	out := make([]vectorstore.WeightedTerm, 0, len(text)+len(expansion))
	has := func(t string) bool {
		return slices.ContainsFunc(out, func(w vectorstore.WeightedTerm) bool { return w.Term == t })
	}
	for _, t := range text {
		if !has(t) {
			out = append(out, vectorstore.WeightedTerm{Term: t, Weight: 1})
		}
	}
	for _, w := range expansion {
		if !has(w.Term) {
			out = append(out, w)
		}
	}
	return out
}

// termDocs returns how many live docs hold each of terms.
func (x *lexIndex) termDocs(terms []string) []int {
	out := make([]int, len(terms))
	for i, t := range terms {
		out[i] = int(x.df[t])
	}
	return out
}
