// Package wordvec is an offline table of English word meaning: for each of
// ~34,000 index terms (pkg/bm25 stems of the 50,000 most frequent words of
// GloVe), its GloVe vector (100 dimensions, int8) and its nearest other terms by
// cosine (instruments → guitar, pets → dog). pkg/memory uses it to expand a
// query with words of the user's own memories that mean nearly the same, and to
// re-rank candidates by the similarity of sentence vectors, which keyword
// search alone cannot connect.
//
// The table (table.bin.gz, ~5 MB) is embedded in the binary and parsed on
// first use. Neighbours are precomputed, so a lookup is one map read whatever
// the size of a user's vocabulary. gen.go makes it; see README.md beside it for
// the source, the command and the licences.
package wordvec

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// ErrFormat reports a table that is not in the format gen.go writes.
var ErrFormat = errors.New("wordvec: malformed table")

// magic starts every table; gen.go writes the same string.
const magic = "agentmem-wordvec-2\n"

// maxTerms and maxDims bound the counts a table may declare, so that a corrupt
// count cannot make Parse allocate without limit.
const (
	maxTerms = 1 << 20
	maxDims  = 1024
)

//go:embed table.bin.gz
var asset []byte

// Neighbour is a term close in meaning to another, and their similarity (the
// cosine of their vectors, in steps of 1/255).
type Neighbour struct {
	Term string
	Sim  float64
}

// Table maps index terms to their nearest neighbours. It is immutable and safe
// for concurrent use.
type Table struct {
	terms []string
	index map[string]int32
	start []int32 // term i's neighbours are ids[start[i]:start[i+1]]
	ids   []int32
	sims  []uint8
	dims  int
	vecs  []int8 // term i's vector is vecs[i*dims:(i+1)*dims] × scale[i]
	scale []float32
}

// Default returns the embedded table, parsed on the first call.
var Default = sync.OnceValue(func() *Table {
	t, err := Parse(bytes.NewReader(asset))
	if err != nil {
		panic(fmt.Sprintf("wordvec: embedded table: %v", err)) // a build that ships a broken asset
	}
	return t
})

// Len returns the number of terms.
func (t *Table) Len() int { return len(t.terms) }

// Rank returns term's number in the table, which lists terms by the frequency
// of their most frequent word (0: "new", since stopwords are left out); false
// for a term the table does not know. Frequent terms are the vague ones
// ("make", "time", "like"), whose neighbours are as vague.
func (t *Table) Rank(term string) (int, bool) {
	i, ok := t.index[term]
	return int(i), ok
}

// Dims returns the vectors' dimension count.
func (t *Table) Dims() int { return t.dims }

// AddVector adds weight × term's unit vector to dst (Dims long) and reports
// whether the table knows term; dst is unchanged when it does not.
func (t *Table) AddVector(dst []float32, term string, weight float32) bool {
	i, ok := t.index[term]
	if !ok {
		return false
	}
	w := weight * t.scale[i]
	for d, x := range t.vecs[int(i)*t.dims : (int(i)+1)*t.dims] {
		dst[d] += w * float32(x)
	}
	return true
}

// Neighbours returns term's neighbours, most similar first (none for a term the
// table does not know).
func (t *Table) Neighbours(term string) []Neighbour {
	i, ok := t.index[term]
	if !ok {
		return nil
	}
	lo, hi := t.start[i], t.start[i+1]
	out := make([]Neighbour, hi-lo)
	for j := lo; j < hi; j++ {
		out[j-lo] = Neighbour{Term: t.terms[t.ids[j]], Sim: float64(t.sims[j]) / 255}
	}
	return out
}

// Parse reads a table in gen.go's format (gzip of: the magic line; the term
// count; each term as a length and bytes; for each term its neighbour count and
// each neighbour as a term number and its similarity × 255 in one byte, best
// first; the dimension count; for each term its scale, a little-endian float32,
// and its vector as int8s). Counts are uvarints. Anything else fails with
// ErrFormat.
func Parse(r io.Reader) (*Table, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	br := bufio.NewReader(zr)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != magic {
		return nil, fmt.Errorf("%w: no %q header", ErrFormat, magic[:len(magic)-1])
	}
	n, err := readCount(br, maxTerms, "term count")
	if err != nil {
		return nil, err
	}
	t := &Table{terms: make([]string, 0, n), index: make(map[string]int32, n), start: make([]int32, 1, n+1)}
	for i := range n {
		l, err := readCount(br, 256, "term length")
		if err != nil {
			return nil, err
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("%w: term %d: %w", ErrFormat, i, err)
		}
		if _, dup := t.index[string(b)]; dup || l == 0 {
			return nil, fmt.Errorf("%w: term %d %q is empty or repeated", ErrFormat, i, b)
		}
		t.index[string(b)] = int32(i)
		t.terms = append(t.terms, string(b))
	}
	for i := range n {
		m, err := readCount(br, n, "neighbour count")
		if err != nil {
			return nil, err
		}
		prev := 256
		for range m {
			id, err := readCount(br, n-1, "neighbour")
			if err != nil {
				return nil, err
			}
			sim, err := br.ReadByte()
			if err != nil {
				return nil, fmt.Errorf("%w: neighbour of term %d: %w", ErrFormat, i, err)
			}
			if id == i || int(sim) > prev {
				return nil, fmt.Errorf("%w: term %d: a neighbour is itself or out of order", ErrFormat, i)
			}
			prev = int(sim)
			t.ids = append(t.ids, int32(id))
			t.sims = append(t.sims, sim)
		}
		t.start = append(t.start, int32(len(t.ids)))
	}
	if t.dims, err = readCount(br, maxDims, "dimension count"); err != nil {
		return nil, err
	}
	t.scale = make([]float32, n)
	t.vecs = make([]int8, n*t.dims)
	raw := make([]byte, 4+t.dims)
	for i := range n {
		if _, err := io.ReadFull(br, raw); err != nil {
			return nil, fmt.Errorf("%w: vector of term %d: %w", ErrFormat, i, err)
		}
		t.scale[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw))
		if !(t.scale[i] >= 0 && t.scale[i] < 1) { // a unit vector's largest part / 127
			return nil, fmt.Errorf("%w: term %d: scale %v", ErrFormat, i, t.scale[i])
		}
		for d, b := range raw[4:] {
			t.vecs[i*t.dims+d] = int8(b)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the last term", ErrFormat)
	}
	return t, nil
}

// readCount reads a uvarint of at most limit.
func readCount(r io.ByteReader, limit int, what string) (int, error) {
	v, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrFormat, what, err)
	}
	if v > uint64(limit) {
		return 0, fmt.Errorf("%w: %s %d, want at most %d", ErrFormat, what, v, limit)
	}
	return int(v), nil
}
