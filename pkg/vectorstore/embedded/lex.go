package embedded

import (
	"cmp"
	"math"
	"slices"
	"strings"

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
	terms    map[string]lexTerm
	docLen   []int32 // by doc
	total    int64   // tokens of the live docs
	live     int
}

type lexPosting struct{ doc, tf int32 }

// lexTerm is a term's statistics: how many live docs hold it, and the largest
// count and shortest doc of its postings (dead ones too: they only loosen the
// bound topScores takes from them, until the partition compacts).
type lexTerm struct{ df, maxTF, minLen int32 }

func newLexIndex() lexIndex {
	return lexIndex{postings: make(map[string][]lexPosting), terms: make(map[string]lexTerm)}
}

// termCounts calls fn with each distinct term of terms (space-joined), its
// count and how many terms there are, in sorted order; it returns how many there are.
func termCounts(terms string, fn func(term string, n, all int32)) int32 {
	toks := strings.Fields(terms)
	slices.Sort(toks)
	for i := 0; i < len(toks); {
		j := i + 1
		for j < len(toks) && toks[j] == toks[i] {
			j++
		}
		fn(toks[i], int32(j-i), int32(len(toks)))
		i = j
	}
	return int32(len(toks))
}

// add indexes doc, the newest doc number, with its terms.
func (x *lexIndex) add(doc int32, terms string) {
	toks := termCounts(terms, func(t string, tf, toks int32) {
		x.postings[t] = append(x.postings[t], lexPosting{doc, tf})
		lt, ok := x.terms[t]
		if !ok {
			lt = lexTerm{maxTF: tf, minLen: toks}
		}
		lt.df++
		lt.maxTF, lt.minLen = max(lt.maxTF, tf), min(lt.minLen, toks)
		x.terms[t] = lt
	})
	for int(doc) >= len(x.docLen) {
		x.docLen = append(x.docLen, 0)
	}
	x.docLen[doc] = toks
	x.total += int64(toks)
	x.live++
}

// remove takes doc, indexed with terms, out of the statistics; its postings stay
// until the partition compacts, and searches skip them.
func (x *lexIndex) remove(doc int32, terms string) {
	termCounts(terms, func(t string, _, _ int32) {
		lt := x.terms[t]
		if lt.df--; lt.df <= 0 {
			delete(x.terms, t)
			delete(x.postings, t) // every posting left is dead
			return
		}
		x.terms[t] = lt
	})
	x.total -= int64(x.docLen[doc])
	x.live--
}

// bm25Part is a term's BM25 part of a doc's score times its weight: the one
// expression both scoring paths use, so that they agree bit for bit.
func bm25Part(p bm25.Params, idf, avgLen float64, docLen, tf int32, weight float64) float64 {
	norm := 1.0
	if avgLen > 0 {
		norm = 1 - p.B + p.B*float64(docLen)/avgLen
	}
	f := float64(tf)
	// × 1 is exact, so a query without expansion scores as pkg/bm25 does.
	return float64(idf*(f*(p.K1+1)/(f+p.K1*norm))) * weight
}

// idf is pkg/bm25's inverse document frequency of a term held by df of n docs.
func idf(n float64, df int32) float64 {
	return math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
}

// boundSlack widens the upper bounds that topScores prunes by, beyond any
// rounding: a sum of at most a few thousand positive parts is off by far less
// than 1e-9 of itself in any order, so a doc whose widened bound is below the
// floor scores below it however its parts are added.
const boundSlack = 1 + 1e-9

// termCursor walks one query term's postings in topScores.
type termCursor struct {
	post   []lexPosting // not yet passed
	pos    int          // the term's place in the query
	idf    float64
	weight float64
	// bound is the term's part of a doc with its largest count and its shortest
	// doc's length: no doc's part exceeds it (the part rises with the count and
	// falls with the length), and it is far tighter than idf × (k1+1) × weight.
	bound float64
	sum   float64 // bound plus the bounds of every cursor before it (smaller bounds)
}

// seek drops the postings before doc d. It gallops: the candidates come in
// ascending order, so the next one is usually near.
func seek(post []lexPosting, d int32) []lexPosting {
	hi := 1
	for hi < len(post) && post[hi].doc < d {
		hi *= 2
	}
	j, _ := slices.BinarySearchFunc(post[:min(hi+1, len(post))], d, func(ps lexPosting, d int32) int { return cmp.Compare(ps.doc, d) })
	return post[j:]
}

// termPart is a doc's part of one term, by the term's place in the query.
type termPart struct {
	pos  int
	part float64
}

// topScores calls fn, in ascending doc order, with every live doc holding a
// query term whose score (as scores gives it, bit for bit) is at least floor()
// when it is reached, and with that score; it may call fn with docs scoring
// less. floor must never fall: a caller keeping the best k passes the k-th best
// score kept (-Inf until it holds k), so every doc that could enter is offered.
// query is distinct terms with positive weights (queryTerms of a validated
// query); alive reports whether a doc may be offered at all.
//
// It is MaxScore (Turtle and Flood, 1995): the terms sorted by bound, those
// whose bounds together stay below the floor are non-essential, a doc none of
// the others holds cannot reach the floor, so only the essential terms'
// postings are walked and the non-essential ones are probed by binary search
// for a candidate whose bound is still above the floor. The parts of a doc that
// is offered are added in query order, as scores adds them, so it scores alike.
func (x *lexIndex) topScores(query []vectorstore.WeightedTerm, alive func(int32) bool, floor func() float64, fn func(doc int32, score float64)) {
	if x.live == 0 {
		return
	}
	p := bm25.DefaultParams()
	n := float64(x.live)
	avgLen := float64(x.total) / n
	cur := make([]termCursor, 0, len(query))
	for i, wt := range query {
		if lt := x.terms[wt.Term]; lt.df > 0 {
			idf := idf(n, lt.df)
			bound := bm25Part(p, idf, avgLen, lt.minLen, lt.maxTF, wt.Weight)
			cur = append(cur, termCursor{post: x.postings[wt.Term], pos: i, idf: idf, weight: wt.Weight, bound: bound})
		}
	}
	slices.SortFunc(cur, func(a, b termCursor) int { return cmp.Compare(a.bound, b.bound) })
	sum := 0.0
	for i := range cur {
		sum += cur[i].bound
		cur[i].sum = sum
	}
	parts := make([]termPart, 0, len(cur))
	theta := floor()
	ne := 0 // cur[:ne] are non-essential
	for {
		for ne < len(cur) && cur[ne].sum*boundSlack < theta {
			ne++
		}
		d := int32(math.MaxInt32)
		for i := ne; i < len(cur); i++ {
			if c := &cur[i]; len(c.post) > 0 && c.post[0].doc < d {
				d = c.post[0].doc
			}
		}
		if d == math.MaxInt32 {
			return // no essential term is left: nothing left can reach the floor
		}
		live := alive(d)
		parts = parts[:0]
		partial := 0.0
		for i := ne; i < len(cur); i++ {
			c := &cur[i]
			if len(c.post) == 0 || c.post[0].doc != d {
				continue
			}
			if live {
				part := bm25Part(p, c.idf, avgLen, x.docLen[d], c.post[0].tf, c.weight)
				parts = append(parts, termPart{c.pos, part})
				partial += part
			}
			c.post = c.post[1:]
		}
		if !live {
			continue
		}
		for i := ne - 1; i >= 0 && live; i-- {
			if (partial+cur[i].sum)*boundSlack < theta {
				live = false // even every remaining term's bound cannot lift d to the floor
				break
			}
			c := &cur[i]
			c.post = seek(c.post, d)
			if len(c.post) > 0 && c.post[0].doc == d {
				part := bm25Part(p, c.idf, avgLen, x.docLen[d], c.post[0].tf, c.weight)
				parts = append(parts, termPart{c.pos, part})
				partial += part
			}
		}
		if !live {
			continue
		}
		slices.SortFunc(parts, func(a, b termPart) int { return cmp.Compare(a.pos, b.pos) })
		score := 0.0
		for _, tp := range parts {
			score += tp.part
		}
		fn(d, score)
		theta = floor()
	}
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
		out[i] = int(x.terms[t].df)
	}
	return out
}
