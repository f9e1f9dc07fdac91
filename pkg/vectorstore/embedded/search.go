package embedded

import (
	"cmp"
	"context"
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

// ranked is a record (by slot, and rid to break ties) and its score on one side,
// or its fused score. It holds no pointer, so sorting it costs no write barriers.
type ranked struct {
	rid   int64
	slot  int
	score float64
}

// Search implements vectorstore.Backend. The filter selects the candidates once,
// from the partition in memory; both sides rank only those.
func (s *backend) Search(ctx context.Context, q vectorstore.Query) ([]vectorstore.Hit, error) {
	var terms []string
	if q.Mode != vectorstore.Dense {
		terms = bm25.Tokenize(q.Text)
	}
	var qv []float32
	if q.Mode != vectorstore.Sparse {
		qv = slices.Clone(q.Vector)
		embed.Normalize(qv)
	}
	m := newMatcher(q.Filter, time.Now())
	var hits []vectorstore.Hit
	err := s.read(ctx, partKey{q.Filter.Tenant, q.Filter.UserID}, func(p *partition) error {
		candidates := p.candidates(m)
		if len(candidates) == 0 {
			return nil
		}
		depth := q.Limit
		if q.Mode == vectorstore.Hybrid {
			depth *= hybridDepth
		}
		var top []ranked
		switch q.Mode {
		case vectorstore.Dense:
			top = denseRanking(p, qv, candidates, depth)
		case vectorstore.Sparse:
			top = sparseRanking(p, terms, candidates, depth)
		case vectorstore.Hybrid:
			top = fuseRRF(q.Limit, denseRanking(p, qv, candidates, depth), sparseRanking(p, terms, candidates, depth))
		}
		hits = make([]vectorstore.Hit, len(top))
		for i, r := range top {
			e := p.entries[r.slot]
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
	return hits, s.Wrap("search", err)
}

// denseRanking scores the candidates by cosine similarity, exactly.
func denseRanking(p *partition, qv []float32, candidates []int, depth int) []ranked {
	out := make([]ranked, len(candidates))
	for j, i := range candidates {
		e := p.entries[i]
		out[j] = ranked{e.rid, i, float64(dot(qv, e.rec.Vector))}
	}
	return best(out, depth)
}

// sparseRanking ranks the candidates by Okapi BM25 (pkg/bm25, k1 = 1.2, b = 0.75)
// of their text against the query terms, with the partition as the corpus. Only
// the candidates are scored: a search of one memory type skips the others.
func sparseRanking(p *partition, terms []string, candidates []int, depth int) []ranked {
	if len(terms) == 0 {
		return nil
	}
	scores := p.index().Scores(terms, nil)
	out := make([]ranked, 0, len(candidates))
	for _, i := range candidates {
		if sc := scores[i]; sc > 0 {
			out = append(out, ranked{p.entries[i].rid, i, sc})
		}
	}
	return best(out, depth)
}

// best returns the best n of rs, ordered.
func best(rs []ranked, n int) []ranked {
	sortRanked(rs)
	return rs[:min(n, len(rs))]
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
			all = append(all, ranked{r.rid, r.slot, 1 / float64(rrfK+i+1)})
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
