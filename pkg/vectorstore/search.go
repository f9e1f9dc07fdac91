package vectorstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/embed"
)

const (
	// rrfK is the reciprocal rank fusion constant; see the package documentation.
	rrfK = 60
	// hybridDepth is how far down each side's ranking hybrid fusion looks, as a
	// multiple of Limit: deep enough that a record ranked moderately by both sides
	// can overtake one ranked first by only one.
	hybridDepth = 4
)

// ranked is a record (by rid) and its score on one side, or its fused score.
type ranked struct {
	rid   int64
	score float64
}

// Search implements Store. The filter selects the candidates once, in SQL (from
// the covering partition index in the common case); both sides rank only those.
func (s *Embedded) Search(ctx context.Context, q Query) ([]Hit, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	q, err := q.Normalize(s.cfg.Dimensions)
	if err != nil {
		return nil, s.wrap("search", err)
	}
	now := time.Now()
	candidates, err := s.filterRIDs(ctx, q.Filter, now)
	if err != nil || len(candidates) == 0 {
		return nil, s.wrap("search", err)
	}
	depth := q.Limit
	if q.Mode == Hybrid {
		depth *= hybridDepth
	}
	var dense, sparse []ranked
	if q.Mode != Sparse {
		if dense, err = s.denseRanking(ctx, q, candidates, depth); err != nil {
			return nil, s.wrap("search: dense", err)
		}
	}
	if q.Mode != Dense {
		if sparse, err = s.sparseRanking(ctx, q, candidates, depth); err != nil {
			return nil, s.wrap("search: sparse", err)
		}
	}
	top := dense
	switch q.Mode {
	case Sparse:
		top = sparse
	case Hybrid:
		top = fuseRRF(q.Limit, dense, sparse)
	}
	hits, err := s.hydrate(ctx, q.Filter, now, top)
	return hits, s.wrap("search", err)
}

// filterRIDs returns the rids of the records f selects.
func (s *Embedded) filterRIDs(ctx context.Context, f Filter, now time.Time) ([]int64, error) {
	where, args := whereFilter(f, now)
	rows, err := s.query(ctx, `SELECT r.rid FROM records r WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rids []int64
	for rows.Next() {
		var rid int64
		if err := rows.Scan(&rid); err != nil {
			return nil, err
		}
		rids = append(rids, rid)
	}
	return rids, rows.Err()
}

// denseRanking scores the candidates by cosine similarity, exactly, against the
// partition's in-memory vectors.
func (s *Embedded) denseRanking(ctx context.Context, q Query, candidates []int64, depth int) ([]ranked, error) {
	k := partKey{q.Filter.Tenant, q.Filter.UserID}
	if err := s.loadPartition(ctx, k); err != nil {
		return nil, err
	}
	qv := slices.Clone(q.Vector)
	embed.Normalize(qv)
	out := make([]ranked, 0, len(candidates))
	s.cacheMu.RLock()
	p := s.parts[k]
	for _, rid := range candidates {
		// A rid missing here was deleted after the filter ran: skip it, as if the
		// search had run a moment later.
		if sc, ok := p.score(rid, qv); ok {
			out = append(out, ranked{rid, float64(sc)})
		}
	}
	s.cacheMu.RUnlock()
	sortRanked(out)
	return out[:min(depth, len(out))], nil
}

// sparseRanking ranks the candidates by Okapi BM25 (pkg/bm25, k1 = 1.2, b = 0.75)
// of their text against q.Text, with the partition as the corpus.
func (s *Embedded) sparseRanking(ctx context.Context, q Query, candidates []int64, depth int) ([]ranked, error) {
	terms := bm25.Tokenize(q.Text)
	if len(terms) == 0 {
		return nil, nil
	}
	k := partKey{q.Filter.Tenant, q.Filter.UserID}
	if err := s.loadPartition(ctx, k); err != nil {
		return nil, err
	}
	allowed := make(map[int64]struct{}, len(candidates))
	for _, rid := range candidates {
		allowed[rid] = struct{}{}
	}
	s.cacheMu.RLock()
	p := s.parts[k]
	ix := p.index()
	var out []ranked
	for _, r := range ix.Search(terms, ix.Len()) {
		rid := p.rids[r.Doc]
		if _, ok := allowed[rid]; ok {
			out = append(out, ranked{rid, r.Score})
		}
	}
	s.cacheMu.RUnlock()
	sortRanked(out)
	return out[:min(depth, len(out))], nil
}

// fuseRRF merges rankings by reciprocal rank fusion and returns the best limit.
func fuseRRF(limit int, rankings ...[]ranked) []ranked {
	scores := make(map[int64]float64)
	for _, rk := range rankings {
		for i, r := range rk {
			scores[r.rid] += 1 / float64(rrfK+i+1)
		}
	}
	out := make([]ranked, 0, len(scores))
	for rid, sc := range scores {
		out = append(out, ranked{rid, sc})
	}
	sortRanked(out)
	return out[:min(limit, len(out))]
}

// sortRanked orders best first; ties by rid, so equal scores rank the same way on
// every call.
func sortRanked(rs []ranked) {
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.rid, b.rid)
	})
}

// hydrate loads the ranked records in order. It applies the filter again: a rid
// freed by a concurrent delete can be reused by SQLite for another partition's
// record, which must never come back here.
func (s *Embedded) hydrate(ctx context.Context, f Filter, now time.Time, top []ranked) ([]Hit, error) {
	if len(top) == 0 {
		return nil, nil
	}
	rids := make([]int64, len(top))
	for i, r := range top {
		rids[i] = r.rid
	}
	where, args := whereFilter(f, now)
	rows, err := s.query(ctx, `SELECT `+recordCols+` FROM records r
		WHERE r.rid IN (SELECT value FROM json_each(?)) AND `+where, append([]any{jsonList(rids)}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byRID := make(map[int64]Record, len(top))
	for rows.Next() {
		rec, rid, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		byRID[rid] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, len(top))
	for _, r := range top {
		if rec, ok := byRID[r.rid]; ok {
			hits = append(hits, Hit{Record: rec, Score: r.score})
		}
	}
	return hits, nil
}
