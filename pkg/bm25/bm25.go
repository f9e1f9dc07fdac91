// Package bm25 is the lexical relevance model shared by Markdown chunk search and the
// vector stores' sparse vectors: one tokenizer and one Okapi BM25 scorer, so that a
// query ranks the same way wherever it is run.
package bm25

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// ErrInvalidParams is returned (wrapped, naming the field) by Params.Validate.
var ErrInvalidParams = errors.New("bm25: invalid params")

// Params are the BM25 free parameters.
type Params struct {
	// K1 is term-frequency saturation: how much repeated occurrences still add (>= 0).
	K1 float64
	// B is length normalisation, from 0 (none) to 1 (full).
	B float64
}

// DefaultParams returns the usual K1 = 1.2, B = 0.75.
func DefaultParams() Params { return Params{K1: 1.2, B: 0.75} }

// Validate reports a K1 that is negative or not finite, or a B outside [0, 1].
func (p Params) Validate() error {
	if math.IsNaN(p.K1) || math.IsInf(p.K1, 0) || p.K1 < 0 {
		return fmt.Errorf("%w: K1 is %v, want a finite number >= 0", ErrInvalidParams, p.K1)
	}
	if math.IsNaN(p.B) || p.B < 0 || p.B > 1 {
		return fmt.Errorf("%w: B is %v, want a number in [0, 1]", ErrInvalidParams, p.B)
	}
	return nil
}

// Result is one matching document of a Search.
type Result struct {
	Doc   int // index into the docs given to NewIndex
	Score float64
}

type posting struct {
	doc, tf int
}

// Index is an immutable BM25 index over a fixed list of documents; it is safe for
// concurrent use.
type Index struct {
	p        Params
	docLen   []int
	norm     []float64            // per doc: BM25's length normalisation, computed once
	postings map[string][]posting // sorted by doc
}

// NewIndex indexes docs, each a token list (normally from Tokenize). The zero Params
// means DefaultParams; Params that fail Validate are replaced by DefaultParams too, so
// that a bad setting degrades ranking instead of failing a read path. Validate the
// params where they are configured.
func NewIndex(docs [][]string, p Params) *Index {
	if p == (Params{}) || p.Validate() != nil {
		p = DefaultParams()
	}
	ix := &Index{p: p, docLen: make([]int, len(docs)), norm: make([]float64, len(docs)), postings: map[string][]posting{}}
	total := 0
	tf := map[string]int{} // reused: one map for all docs
	for d, toks := range docs {
		ix.docLen[d] = len(toks)
		total += len(toks)
		clear(tf)
		for _, t := range toks {
			tf[t]++
		}
		for t, n := range tf {
			ix.postings[t] = append(ix.postings[t], posting{doc: d, tf: n})
		}
	}
	avgLen := 0.0
	if len(docs) > 0 {
		avgLen = float64(total) / float64(len(docs))
	}
	for d, n := range ix.docLen {
		ix.norm[d] = 1.0
		if avgLen > 0 {
			ix.norm[d] = 1 - p.B + p.B*float64(n)/avgLen
		}
	}
	return ix
}

// Len returns the number of indexed documents.
func (ix *Index) Len() int { return len(ix.docLen) }

// IDF returns the inverse document frequency of term, in the always-positive form
// log(1 + (N - n + 0.5) / (n + 0.5)) used by Lucene, so that a term present in most
// documents still adds a little instead of subtracting; 0 for a term in no document.
func (ix *Index) IDF(term string) float64 {
	n := len(ix.postings[term])
	if n == 0 {
		return 0
	}
	return math.Log(1 + (float64(len(ix.docLen))-float64(n)+0.5)/(float64(n)+0.5))
}

// Score returns the BM25 score of doc for query. Each distinct query term counts once,
// however often the query repeats it. A doc index out of range scores 0.
func (ix *Index) Score(query []string, doc int) float64 {
	if doc < 0 || doc >= len(ix.docLen) {
		return 0
	}
	score := 0.0
	for _, term := range distinct(query) {
		ps := ix.postings[term]
		i := sort.Search(len(ps), func(i int) bool { return ps[i].doc >= doc })
		if i < len(ps) && ps[i].doc == doc {
			score += ix.termScore(ix.IDF(term), ps[i])
		}
	}
	return score
}

// Scores returns the BM25 score of every document for query, indexed by doc (0
// for a document without a query term), equal bit for bit to Score's: each doc
// sums the same terms in the same order. It walks the query terms' postings
// once (term at a time), instead of looking every term up for every document.
// dst is reused when it has the capacity.
func (ix *Index) Scores(query []string, dst []float64) []float64 {
	dst = slices.Grow(dst[:0], len(ix.docLen))[:len(ix.docLen)]
	clear(dst)
	for _, term := range distinct(query) {
		ps := ix.postings[term]
		if len(ps) == 0 {
			continue
		}
		idf := ix.IDF(term)
		for _, p := range ps {
			dst[p.doc] += ix.termScore(idf, p)
		}
	}
	return dst
}

// termScore is one term's contribution to a document: its IDF times BM25's
// saturated, length-normalised term frequency. The explicit conversion rounds the
// product on its own, so no compiler fuses it with the caller's sum (an FMA) and
// Score and Scores add exactly the same values.
func (ix *Index) termScore(idf float64, p posting) float64 {
	f := float64(p.tf)
	return float64(idf * (f * (ix.p.K1 + 1) / (f + ix.p.K1*ix.norm[p.doc])))
}

// Search returns at most limit documents with a score above zero, highest score first
// and, for equal scores, lower doc index first. limit <= 0 returns nil.
func (ix *Index) Search(query []string, limit int) []Result {
	if limit <= 0 {
		return nil
	}
	var results []Result
	for d, s := range ix.Scores(query, nil) {
		if s > 0 {
			results = append(results, Result{Doc: d, Score: s})
		}
	}
	slices.SortFunc(results, func(a, b Result) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Doc, b.Doc)
	})
	if len(results) > limit {
		results = results[:limit]
	}
	return results
}

// distinct returns terms without repeats, in first-seen order so sums are reproducible.
func distinct(terms []string) []string {
	seen := make(map[string]struct{}, len(terms))
	out := make([]string, 0, len(terms))
	for _, t := range terms {
		if _, ok := seen[t]; !ok {
			seen[t] = struct{}{}
			out = append(out, t)
		}
	}
	return out
}
