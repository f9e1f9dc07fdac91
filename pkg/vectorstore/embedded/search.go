package embedded

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const (
	// rrfK is the reciprocal rank fusion constant; see the package documentation.
	rrfK = 60
	// hybridDepth is how far down each side's ranking hybrid fusion looks, as a
	// multiple of Limit: deep enough that a record ranked moderately by both sides
	// can overtake one ranked first by only one.
	hybridDepth = 4
)

// ranked is a record (by doc, and rid to break ties) and its score on one side,
// or its fused score. It holds no pointer, so sorting it costs no write barriers.
type ranked struct {
	rid   int64
	doc   int32
	score float64
}

// Search implements vectorstore.Backend. The filter selects the candidates once,
// from the partition in memory; both sides rank only those.
func (s *backend) Search(ctx context.Context, q vectorstore.Query) ([]vectorstore.Hit, error) {
	var terms []vectorstore.WeightedTerm
	if q.Mode != vectorstore.Dense {
		terms = queryTerms(bm25.Tokenize(q.Text), q.Expansion)
	}
	var qv []float32
	if q.Mode != vectorstore.Sparse {
		qv = slices.Clone(q.Vector)
		embed.Normalize(qv)
	}
	m := newMatcher(q.Filter, time.Now())
	var (
		hits    []vectorstore.Hit
		indexed *partition // given a graph by this search
	)
	err := s.read(ctx, partKey{q.Filter.Tenant, q.Filter.UserID}, func(p *partition) error {
		depth := q.Limit
		if q.Mode == vectorstore.Hybrid {
			depth *= hybridDepth
		}
		var top []ranked
		if q.Mode != vectorstore.Sparse {
			var started bool
			if top, started = denseRanking(p, qv, m, depth, s.cfg.ANNBeam); started {
				indexed = p
			}
		}
		switch q.Mode {
		case vectorstore.Sparse:
			top = sparseRanking(p, terms, m, depth)
		case vectorstore.Hybrid:
			top = fuseRRF(q.Limit, top, sparseRanking(p, terms, m, depth))
		}
		hits = make([]vectorstore.Hit, len(top))
		for i, r := range top {
			e := p.docs[r.doc]
			if q.WithoutMetadata {
				hits[i] = vectorstore.Hit{Record: e.rec, Score: r.score}
				continue
			}
			rec, err := e.record()
			if err != nil {
				return err
			}
			hits[i] = vectorstore.Hit{Record: rec, Score: r.score}
		}
		return nil
	})
	if indexed != nil {
		s.cacheMu.RLock()
		s.indexer.notify(indexed)
		s.cacheMu.RUnlock()
	}
	return hits, s.Wrap("search", err)
}

// sparseRanking ranks the records m selects by Okapi BM25 (k1 = 1.2, b = 0.75,
// pkg/bm25's scores) of their text against the query terms, with the partition as
// the corpus. It walks the query terms' postings (lexIndex) and matches only the
// records they reach, pruned to those that can still make the best depth
// (lexIndex.topScores): a search of one memory type costs at most the postings,
// not the partition.
func sparseRanking(p *partition, terms []vectorstore.WeightedTerm, m *matcher, depth int) []ranked {
	return rankSparse(p, terms, m, depth, p.lex.topScores)
}

// sparseScorer is lexIndex.topScores, or a scorer offering at least as much.
type sparseScorer func(query []vectorstore.WeightedTerm, alive func(int32) bool, floor func() float64, fn func(doc int32, score float64))

// rankSparse is sparseRanking by the docs and scores score offers.
func rankSparse(p *partition, terms []vectorstore.WeightedTerm, m *matcher, depth int, score sparseScorer) []ranked {
	if len(terms) == 0 || depth <= 0 {
		return nil
	}
	var allowed []int32
	if m.ids != nil {
		allowed = p.candidates(m)
		if len(allowed) == 0 {
			return nil
		}
	}
	top := newTopK(depth)
	alive := func(d int32) bool { k := p.kinds[d]; return k != deadKind && m.kinds[k] }
	floor := func() float64 {
		if top.full() {
			return top.worst()
		}
		return math.Inf(-1)
	}
	score(terms, alive, floor, func(d int32, sc float64) {
		if sc <= 0 || top.full() && sc < top.worst() {
			return // decided without reading the record
		}
		if allowed != nil {
			if !slices.Contains(allowed, d) {
				return
			}
		} else if !m.typeOnly && !m.match(p.docs[d]) {
			return
		}
		top.offer(ranked{p.rids[d], d, sc})
	})
	return top.sorted()
}

// best returns the best n of rs, ordered.
func best(rs []ranked, n int) []ranked {
	sortRanked(rs)
	return rs[:min(n, len(rs))]
}

// topK keeps the best k of what it is offered (sortRanked's order) in a heap
// whose root is the worst kept, so choosing the best k of n costs n log k
// rather than a sort of all n.
type topK struct {
	k int
	h []ranked
}

func newTopK(k int) *topK { return &topK{k: k, h: make([]ranked, 0, min(k, 1024))} }

// worse reports whether a ranks after b.
func worse(a, b ranked) bool { return a.score < b.score || a.score == b.score && a.rid > b.rid }

func (t *topK) full() bool { return t.k > 0 && len(t.h) == t.k }

// worst is the lowest score kept; only when full.
func (t *topK) worst() float64 { return t.h[0].score }

func (t *topK) offer(r ranked) {
	if t.k <= 0 {
		return
	}
	h := t.h
	if len(h) == t.k {
		if !worse(h[0], r) {
			return
		}
		h[0] = r
		t.down(0)
		return
	}
	h = append(h, r)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !worse(h[i], h[p]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	t.h = h
}

func (t *topK) down(i int) {
	h, n := t.h, len(t.h)
	for {
		l, r, s := 2*i+1, 2*i+2, i
		if l < n && worse(h[l], h[s]) {
			s = l
		}
		if r < n && worse(h[r], h[s]) {
			s = r
		}
		if s == i {
			return
		}
		h[s], h[i] = h[i], h[s]
		i = s
	}
}

// sorted returns what was kept, best first.
func (t *topK) sorted() []ranked {
	sortRanked(t.h)
	return t.h
}

// fuseRRF merges rankings by reciprocal rank fusion and returns the best limit.
// Contributions are summed by sorting them by record, which needs no map.
func fuseRRF(limit int, rankings ...[]ranked) []ranked {
	n := 0
	for _, rk := range rankings {
		n += len(rk)
	}
	all := make([]ranked, 0, n)
	for _, rk := range rankings {
		for i, r := range rk {
			all = append(all, ranked{r.rid, r.doc, 1 / float64(rrfK+i+1)})
		}
	}
	slices.SortFunc(all, func(a, b ranked) int { return cmp.Compare(a.rid, b.rid) })
	out := all[:0]
	for _, r := range all {
		if n := len(out); n > 0 && out[n-1].rid == r.rid {
			out[n-1].score += r.score
		} else {
			out = append(out, r)
		}
	}
	return best(out, limit)
}

// sortRanked orders best first; ties by rid (insertion order), so equal scores
// rank the same way on every call.
func sortRanked(rs []ranked) {
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.rid, b.rid)
	})
}
