package memory

import (
	"fmt"
	"math"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/wordvec"
)

// RerankConfig tunes the semantic re-ranking of a recall's candidates: each
// gains Weight × the cosine between its sentence vector and the query's × the
// best candidate's score, so that among the memories a keyword search found,
// those about what the question is about move up ("What are Melanie's hobbies?"
// favours "I love painting and running" over "Melanie, your hobbies sound fun").
// A sentence vector is the sum of its words' vectors (pkg/wordvec), each
// weighted by the word's inverse document frequency among the candidates: the
// words every candidate has (the query's own, a speaker's name) weigh next to
// nothing, and what tells the candidates apart decides. Zero fields take the
// defaults.
type RerankConfig struct {
	// Enabled turns the re-ranking on.
	Enabled bool
	// Weight scales the bonus; default 1.5.
	Weight float64
}

func (c *RerankConfig) setDefaults() {
	if c.Weight == 0 {
		c.Weight = 1.5
	}
}

func (c RerankConfig) validate() []error {
	if !finite(c.Weight) || c.Weight <= 0 {
		return []error{fmt.Errorf("Rerank.Weight is %v, want a number > 0", c.Weight)}
	}
	return nil
}

// semanticRerank adds each candidate of rs (sorted best first) its bonus (see
// RerankConfig) and sorts rs again. Words the table does not know (other
// languages) add nothing, so a query or a memory without any leaves its scores
// alone. termsOf gives a text's index terms (textTerms, or a cache of it).
func semanticRerank(rs []Ranked, query string, words *wordvec.Table, weight float64, termsOf func(string) textTermList) {
	if len(rs) < 2 {
		return
	}
	docs := make([]textTermList, len(rs))
	df := map[string]int{}
	for i, r := range rs {
		docs[i] = termsOf(r.Record.Text)
		for _, t := range docs[i].distinct {
			df[t]++
		}
	}
	n := float64(len(rs))
	idf := func(t string) float32 {
		d := float64(df[t])
		return float32(math.Log(1 + (n-d+0.5)/(d+0.5)))
	}
	q := make([]float32, words.Dims())
	for _, t := range expandable(query) {
		words.AddVector(q, t, idf(t))
	}
	if !normalize(q) {
		return
	}
	best := rs[0].Score
	v := make([]float32, len(q))
	for i := range rs {
		clear(v)
		for _, t := range docs[i].all {
			words.AddVector(v, t, idf(t))
		}
		if normalize(v) {
			rs[i].Score += weight * dot(q, v) * best
		}
	}
	sortRanked(rs)
}

// textTermList is a text's index terms: all of them in order (a repeated word
// adds its vector again) and each once (a word's document frequency).
type textTermList struct {
	all, distinct []string
}

// textTerms tokenizes text for the re-ranking.
func textTerms(text string) textTermList {
	all := bm25.Tokenize(text)
	seen := make(map[string]bool, len(all))
	distinct := make([]string, 0, len(all))
	for _, t := range all {
		if !seen[t] {
			seen[t] = true
			distinct = append(distinct, t)
		}
	}
	return textTermList{all: all, distinct: distinct}
}

// termCacheSize is how many memory texts' terms the re-ranking keeps: the same
// memories come back as candidates request after request, and tokenizing them
// was half of the re-ranking's time.
const termCacheSize = 4096

// newTermCache returns textTerms behind an LRU keyed by the text itself (an
// updated memory is a new key; identical texts share one entry).
func newTermCache() func(string) textTermList {
	cache, err := lru.New[string, textTermList](termCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return func(text string) textTermList {
		if ts, ok := cache.Get(text); ok {
			return ts
		}
		ts := textTerms(text)
		cache.Add(text, ts)
		return ts
	}
}

// normalize scales v to unit length and reports whether it had any.
func normalize(v []float32) bool {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return false
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
	return true
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
