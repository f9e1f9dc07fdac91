package memory

import (
	"fmt"
	"math"

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
// alone.
func semanticRerank(rs []Ranked, query string, words *wordvec.Table, weight float64) {
	if len(rs) < 2 {
		return
	}
	docs := make([][]string, len(rs))
	df := map[string]int{}
	for i, r := range rs {
		docs[i] = bm25.Tokenize(r.Record.Text)
		for j, t := range docs[i] {
			if !containsBefore(docs[i], j, t) {
				df[t]++
			}
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
		for _, t := range docs[i] {
			words.AddVector(v, t, idf(t))
		}
		if normalize(v) {
			rs[i].Score += weight * dot(q, v) * best
		}
	}
	sortRanked(rs)
}

// containsBefore reports whether ts[:j] holds t: a word's repeats in one text
// count once in its document frequency.
func containsBefore(ts []string, j int, t string) bool {
	for _, s := range ts[:j] {
		if s == t {
			return true
		}
	}
	return false
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
