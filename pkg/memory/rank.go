package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// RankConfig tunes the re-ranking of recalled memories (see the package
// documentation for the formula). Zero fields take the defaults; to rank by
// relevance alone set a weight to a negligible value such as 1e-9, which still
// breaks ties of relevance.
type RankConfig struct {
	// RecencyHalfLife is the age at which the recency bonus halves; default 30 days.
	RecencyHalfLife time.Duration
	// RecencyWeight is the bonus of a memory written just now; default 0.15.
	RecencyWeight float64
	// HitWeight scales ln(1 + hit_count); default 0.05.
	HitWeight float64
}

func (c *RankConfig) setDefaults() {
	if c.RecencyHalfLife == 0 {
		c.RecencyHalfLife = 30 * 24 * time.Hour
	}
	if c.RecencyWeight == 0 {
		c.RecencyWeight = 0.15
	}
	if c.HitWeight == 0 {
		c.HitWeight = 0.05
	}
}

func (c RankConfig) validate() []error {
	var errs []error
	if c.RecencyHalfLife <= 0 {
		errs = append(errs, fmt.Errorf("Rank.RecencyHalfLife is %s, want > 0", c.RecencyHalfLife))
	}
	if !finite(c.RecencyWeight) || c.RecencyWeight < 0 {
		errs = append(errs, fmt.Errorf("Rank.RecencyWeight is %v, want a number >= 0", c.RecencyWeight))
	}
	if !finite(c.HitWeight) || c.HitWeight < 0 {
		errs = append(errs, fmt.Errorf("Rank.HitWeight is %v, want a number >= 0", c.HitWeight))
	}
	return errs
}

// Score is the ranking score of a memory of relevance in [0, 1], age old, used
// hitCount times:
//
//	relevance × (1 + RecencyWeight·2^(−age/RecencyHalfLife) + HitWeight·ln(1 + hitCount))
//
// A negative age (a timestamp ahead of the clock) counts as 0 and a negative hit
// count as 0, so the score never exceeds that of a fresh memory.
func (c RankConfig) Score(relevance float64, age time.Duration, hitCount int) float64 {
	recency := math.Exp2(-max(age, 0).Seconds() / c.RecencyHalfLife.Seconds())
	return relevance * (1 + c.RecencyWeight*recency + c.HitWeight*math.Log1p(float64(max(hitCount, 0))))
}

// maxHybridScore is the best hybrid score of either vector store backend: RRF
// with k = 60, first on both sides, 2/(60+1) (vectorstore package documentation).
const maxHybridScore = 2.0 / 61

// Relevance maps a vector store hybrid score to [0, 1]: 1 for a memory ranked
// first by both the dense and the sparse side, 0.5 for one ranked first by one
// side only. Dividing by the best possible score rather than the best hit keeps a
// weak match weak when nothing better exists.
func Relevance(hybridScore float64) float64 {
	return min(1, max(0, hybridScore/maxHybridScore))
}

const (
	// recallOversample is how many candidates per result Recall takes from the
	// store before re-ranking, so that a recent or often used memory just below
	// the cut can move up; the bonus is at most about 1.4× at 100 hits, which RRF's
	// flat scores let cross only a few ranks.
	recallOversample = 2
	// maxRecallFetch bounds the refetching when expired records fill the candidates.
	maxRecallFetch = 4 * events.MaxLimit
)

// Ranked is a recalled memory and its ranking score.
type Ranked struct {
	Record vectorstore.Record
	Score  float64
}

// Recall is the hybrid search and re-rank shared by Search and the retriever's
// context packs. It embeds query once and runs one hybrid search per memory type
// (types empty: episodic and semantic), so each type gets its own limit (limits;
// a missing or zero entry takes the type's K of Config) and its own ranks; the
// per-type results are merged, best first, ties by id. Expired records are never
// returned.
func (s *Service) Recall(ctx context.Context, tenant, userID, query string, types []vectorstore.MemoryType, limits map[vectorstore.MemoryType]int) ([]Ranked, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), events.ValidateID("user_id", userID)); err != nil {
		return nil, invalid(err)
	}
	if query == "" {
		return nil, invalidf("query is required")
	}
	for t, k := range limits {
		if k < 0 || k > events.MaxLimit {
			return nil, invalidf("limit of %s is %d, want 0 (default) to %d", t, k, events.MaxLimit)
		}
	}
	return s.recall(ctx, vectorstore.Filter{Tenant: tenant, UserID: userID}, query, types, limits)
}

// recall is Recall within base (tenant, user, and for items a scope).
func (s *Service) recall(ctx context.Context, base vectorstore.Filter, query string, types []vectorstore.MemoryType, limits map[vectorstore.MemoryType]int) ([]Ranked, error) {
	if len(types) == 0 {
		types = vectorTypes
	}
	for _, t := range types {
		if !t.Valid() {
			return nil, invalidf("memory type %q is not one of %q", t, []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item})
		}
	}
	vec, err := s.embedOne(ctx, query)
	if err != nil {
		return nil, err
	}
	now := s.now()
	types = slices.Clone(types)
	slices.Sort(types)
	types = slices.Compact(types)
	perType := make([][]Ranked, len(types))
	errs := make([]error, len(types))
	var wg sync.WaitGroup
	for i, t := range types {
		// The per-type searches are independent; running them side by side halves
		// the latency of the common two-type recall.
		wg.Go(func() { perType[i], errs[i] = s.recallType(ctx, base, t, query, vec, limits[t], now) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := slices.Concat(perType...)
	sortRanked(out)
	return out, nil
}

// recallType is one type's share of recall: its best k (0: the type's default)
// live records of base, re-ranked.
func (s *Service) recallType(ctx context.Context, base vectorstore.Filter, t vectorstore.MemoryType, query string, vec []float32, k int, now time.Time) ([]Ranked, error) {
	if k == 0 {
		k = s.defaultK(t)
	}
	f := base
	f.MemoryTypes = []vectorstore.MemoryType{t}
	f.IncludeExpired = true
	hits, err := s.searchLive(ctx, vectorstore.Query{Filter: f, Vector: vec, Text: query, Mode: vectorstore.Hybrid}, k*recallOversample, now)
	if err != nil {
		return nil, err
	}
	ranked := make([]Ranked, len(hits))
	for j, h := range hits {
		ranked[j] = Ranked{Record: h.Record, Score: s.cfg.Rank.Score(Relevance(h.Score), now.Sub(h.Record.TS), h.Record.HitCount)}
	}
	sortRanked(ranked)
	return ranked[:min(k, len(ranked))], nil
}

func (s *Service) defaultK(t vectorstore.MemoryType) int {
	switch t {
	case vectorstore.Episodic:
		return s.cfg.KEpisodic
	case vectorstore.Semantic:
		return s.cfg.KSemantic
	}
	return s.cfg.KItem
}

// searchLive returns up to want hits of q that are live at now, asking the store
// for more when expired records took candidate places.
func (s *Service) searchLive(ctx context.Context, q vectorstore.Query, want int, now time.Time) ([]vectorstore.Hit, error) {
	for n := want; ; n *= 2 {
		q.Limit = n
		hits, err := s.vectors.Search(ctx, q)
		if err != nil {
			return nil, storeErr("search", err)
		}
		got := len(hits)
		hits = slices.DeleteFunc(hits, func(h vectorstore.Hit) bool { return !live(h.Record, now) })
		if len(hits) >= want || got < n || n >= maxRecallFetch {
			return hits[:min(want, len(hits))], nil
		}
	}
}

// sortRanked orders best first, ties by id, so equal scores rank the same way on
// every call and every backend.
func sortRanked(rs []Ranked) {
	slices.SortFunc(rs, func(a, b Ranked) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Record.ID, b.Record.ID)
	})
}
