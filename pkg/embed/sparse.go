package embed

import (
	"slices"

	"github.com/agentmem/agentmem/pkg/bm25"
)

// SparseK1 is the BM25 term-frequency saturation parameter used by Sparse.
const SparseK1 = 1.2

// SparseVector is a sparse vector: Indices sorted ascending without duplicates,
// Values[i] belonging to Indices[i]. It maps directly onto a Qdrant sparse vector.
type SparseVector struct {
	Indices []uint32
	Values  []float32
}

// Sparse returns the document-side BM25 vector of text: one entry per distinct
// bm25.Tokenize token, index = FNV-1a 32 of the token, value = the BM25-saturated
// term frequency tf·(k1+1)/(tf+k1) with k1 = 1.2.
//
// IDF is deliberately not in the vector: it depends on the whole collection and
// changes with every write, so it belongs to the index (Qdrant's sparse vector
// "modifier: idf", applied at query time). There is no length normalisation (BM25's
// b = 0): memories are short, similar-length texts, and length normalisation needs
// the collection's average length, which a per-record vector cannot know. Queries use
// the same function; a repeated query word then weighs a little more, as in BM25 with
// query-term frequency.
//
// Two tokens whose hashes collide share an index; their frequencies are added
// before saturation, as if they were one word (rare at 32 bits, and harmless for
// ranking).
func Sparse(text string) SparseVector {
	tf := make(map[uint32]int)
	for _, t := range bm25.Tokenize(text) {
		tf[fnv32a(t)]++
	}
	idx := make([]uint32, 0, len(tf))
	for i := range tf {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	vals := make([]float32, len(idx))
	for i, ix := range idx {
		f := float64(tf[ix])
		vals[i] = float32(f * (SparseK1 + 1) / (f + SparseK1))
	}
	return SparseVector{Indices: idx, Values: vals}
}

// With returns v with term (an index term) at value, unless v already has
// term's index: a query's own word keeps its weight. v is not modified.
func (v SparseVector) With(term string, value float32) SparseVector {
	ix := fnv32a(term)
	at, found := slices.BinarySearch(v.Indices, ix)
	if found {
		return v
	}
	return SparseVector{Indices: slices.Insert(slices.Clone(v.Indices), at, ix), Values: slices.Insert(slices.Clone(v.Values), at, value)}
}
