package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bm25"
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
	// RedundancyPenalty is the share of its score a candidate loses when every
	// line of its text is already in a better-ranked memory of its type; default
	// 0.7 (see diversify). Set it to a negligible value such as 1e-9 to rank by
	// score alone.
	RedundancyPenalty float64
	// SpeakerWeight is the bonus of a memory whose speaker (Record.Who) the query
	// names; default 0.6 (see speakerBonus). Set it to a negligible value such as
	// 1e-9 to ignore speakers.
	SpeakerWeight float64
	// Mode is the search the ranking starts from; default vectorstore.Hybrid.
	// vectorstore.Sparse (BM25 alone) suits a lexical embedder such as embed.Local:
	// its dense side only repeats the keyword signal with hashing noise, and fusing
	// it in lowered LoCoMo recall@10 from 50.2 to 47.2 (BENCHMARKS.md).
	Mode vectorstore.Mode
	// Fusion is how Hybrid mode combines the keyword and the dense rankings;
	// default FusionKeyword.
	Fusion Fusion
	// DenseWeight is, with FusionKeyword, the most the dense side adds to a
	// candidate's relevance, against 1 for the best keyword match; default 0.5.
	DenseWeight float64
	// DenseFloor is, with FusionKeyword, the cosine at or below which the dense
	// side adds nothing; default 0.2.
	DenseFloor float64
}

// Fusion is how a hybrid recall combines the keyword (BM25) and the dense
// (embedding) rankings.
type Fusion string

const (
	// FusionKeyword ranks by the keyword score, relative to the best keyword
	// match, plus DenseWeight × the dense similarity, rescaled to [0, 1] between
	// DenseFloor and the nearest dense candidate (fuseKeywordLed). A
	// memory only the dense side finds (no shared word: "hobbies" and "I paint")
	// enters the candidates, but a good keyword match keeps its place: reciprocal
	// rank fusion gives both sides' first places the same score, and on LoCoMo
	// that cost single-hop questions what it gave the others (BENCHMARKS.md).
	FusionKeyword Fusion = "keyword"
	// FusionRRF is the vector store's own hybrid search: reciprocal rank fusion of
	// both rankings with equal weights (k = 60), one request to the store.
	FusionRRF Fusion = "rrf"
)

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
	if c.SpeakerWeight == 0 {
		c.SpeakerWeight = 0.6
	}
	if c.RedundancyPenalty == 0 {
		c.RedundancyPenalty = 0.7
	}
	if c.Mode == 0 {
		c.Mode = vectorstore.Hybrid
	}
	if c.Fusion == "" {
		c.Fusion = FusionKeyword
	}
	if c.DenseWeight == 0 {
		c.DenseWeight = 0.5
	}
	if c.DenseFloor == 0 {
		c.DenseFloor = 0.2
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
	if !finite(c.SpeakerWeight) || c.SpeakerWeight < 0 {
		errs = append(errs, fmt.Errorf("Rank.SpeakerWeight is %v, want a number >= 0", c.SpeakerWeight))
	}
	if !finite(c.RedundancyPenalty) || c.RedundancyPenalty < 0 || c.RedundancyPenalty > 1 {
		errs = append(errs, fmt.Errorf("Rank.RedundancyPenalty is %v, want a number in [0, 1]", c.RedundancyPenalty))
	}
	if c.Mode != vectorstore.Hybrid && c.Mode != vectorstore.Sparse && c.Mode != vectorstore.Dense {
		errs = append(errs, fmt.Errorf("Rank.Mode is %d, want dense, sparse or hybrid", c.Mode))
	}
	if c.Fusion != FusionKeyword && c.Fusion != FusionRRF {
		errs = append(errs, fmt.Errorf("Rank.Fusion is %q, want %q or %q", c.Fusion, FusionKeyword, FusionRRF))
	}
	if !finite(c.DenseWeight) || c.DenseWeight <= 0 {
		errs = append(errs, fmt.Errorf("Rank.DenseWeight is %v, want a number > 0", c.DenseWeight))
	}
	if !finite(c.DenseFloor) || c.DenseFloor < -1 || c.DenseFloor >= 1 {
		errs = append(errs, fmt.Errorf("Rank.DenseFloor is %v, want a cosine in [-1, 1)", c.DenseFloor))
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

// relevance maps a store score of mode to [0, 1]. Hybrid (RRF) scores have a known
// best value; cosine is already bounded; BM25 is not, so it is taken relative to
// the query's best hit.
func relevance(mode vectorstore.Mode, score, best float64) float64 {
	switch mode {
	case vectorstore.Sparse:
		if best <= 0 {
			return 0
		}
		return score / best
	case vectorstore.Dense:
		return min(1, max(0, score))
	}
	return Relevance(score)
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
	r, err := s.RecallStatus(ctx, tenant, userID, query, types, limits)
	return r.Ranked, err
}

// Recalled is a recall's result: the ranked memories and, when the recall could
// not use the embedder, why (Degraded; the ranking is then BM25 alone).
type Recalled struct {
	Ranked   []Ranked
	Degraded []string
}

// RecallStatus is Recall that also says when it degraded: with the embedder
// failing, timing out (Config.QueryEmbedTimeout) or known to be down (within
// Config.EmbedRetryAfter of its last failure), it ranks by BM25 over the stored
// texts, which needs no model, and names the failure in Degraded instead of
// failing.
func (s *Service) RecallStatus(ctx context.Context, tenant, userID, query string, types []vectorstore.MemoryType, limits map[vectorstore.MemoryType]int) (Recalled, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), events.ValidateID("user_id", userID)); err != nil {
		return Recalled{}, invalid(err)
	}
	if query == "" {
		return Recalled{}, invalidf("query is required")
	}
	for t, k := range limits {
		if k < 0 || k > events.MaxLimit {
			return Recalled{}, invalidf("limit of %s is %d, want 0 (default) to %d", t, k, events.MaxLimit)
		}
	}
	return s.recall(ctx, vectorstore.Filter{Tenant: tenant, UserID: userID}, query, types, limits)
}

// recall is Recall within base (tenant, user, and for items a scope).
func (s *Service) recall(ctx context.Context, base vectorstore.Filter, query string, types []vectorstore.MemoryType, limits map[vectorstore.MemoryType]int) (Recalled, error) {
	if len(types) == 0 {
		types = vectorTypes
	}
	for _, t := range types {
		if !t.Valid() {
			return Recalled{}, invalidf("memory type %q is not one of %q", t, []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item})
		}
	}
	vec, degraded, err := s.queryVector(ctx, query)
	if err != nil {
		return Recalled{}, err
	}
	mode := s.cfg.Rank.Mode
	if vec == nil {
		mode = vectorstore.Sparse
	}
	var expansion []vectorstore.WeightedTerm
	if s.cfg.Expansion.Enabled && mode != vectorstore.Dense {
		if expansion, err = Expand(ctx, s.vectors, s.words, s.cfg.Expansion, base, query); err != nil {
			return Recalled{}, err
		}
	}
	now := s.nowAt(ctx)
	types = slices.Clone(types)
	slices.Sort(types)
	types = slices.Compact(types)
	perType := make([]typeRecall, len(types))
	errs := make([]error, len(types))
	var wg sync.WaitGroup
	for i, t := range types {
		// The per-type searches are independent; running them side by side halves
		// the latency of the common two-type recall.
		wg.Go(func() { perType[i], errs[i] = s.recallType(ctx, base, t, query, expansion, vec, mode, limits[t], now) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Recalled{}, err
	}
	if s.keywordScaled(mode) {
		onOneScale(perType)
	}
	n := 0
	for _, tr := range perType {
		n += len(tr.ranked)
	}
	// Each type's list has room for its oversampled candidates, so the first
	// usually holds the merge without a new array.
	out := perType[0].ranked
	if cap(out) < n {
		out = append(make([]Ranked, 0, n), out...)
	}
	for _, tr := range perType[1:] {
		out = append(out, tr.ranked...)
	}
	sortRanked(out)
	return Recalled{Ranked: out, Degraded: degraded}, nil
}

// recallType is one type's share of recall: its best k (0: the type's default)
// live records of base, re-ranked, searched in mode (sparse alone when vec is
// nil: the embedder is down) with the query's expansion.
func (s *Service) recallType(ctx context.Context, base vectorstore.Filter, t vectorstore.MemoryType, query string, expansion []vectorstore.WeightedTerm, vec []float32, mode vectorstore.Mode, k int, now time.Time) (typeRecall, error) {
	if k == 0 {
		k = s.defaultK(t)
	}
	f := base
	f.MemoryTypes = []vectorstore.MemoryType{t}
	f.IncludeExpired = true
	want := k * recallOversample
	// Ranking needs no metadata: the candidates come without it, and only the k
	// kept have theirs read (withMetadata).
	q := vectorstore.Query{Filter: f, Vector: vec, Text: query, Expansion: expansion, Mode: mode, WithoutMetadata: true}
	var (
		hits    []vectorstore.Hit
		keyword float64 // the best BM25 score, when the scores are relative to it
		err     error
	)
	if s.keywordLed(mode) {
		hits, keyword, err = s.fuseKeywordLed(ctx, q, want, now)
	} else {
		hits, err = s.searchLive(ctx, q, want, now)
		if len(hits) > 0 {
			keyword = hits[0].Score
		}
	}
	if err != nil {
		return typeRecall{}, err
	}
	scale := mode
	if s.keywordScaled(mode) {
		scale = vectorstore.Sparse
	}
	ranked := make([]Ranked, 0, want)
	for _, h := range hits {
		ranked = append(ranked, Ranked{Record: h.Record, Score: s.cfg.Rank.Score(relevance(scale, h.Score, hits[0].Score), now.Sub(h.Record.TS), h.Record.HitCount)})
	}
	if mode == vectorstore.Sparse && len(hits) < want && vec != nil {
		// BM25 only finds memories sharing a word with the query; the rest follow
		// by dense similarity (an embedder still matches "study" to "student"),
		// each below every keyword match.
		if ranked, err = s.denseFill(ctx, f, vec, want, now, ranked); err != nil {
			return typeRecall{}, err
		}
	}
	speakerBonus(ranked, query, s.cfg.Rank.SpeakerWeight)
	sortRanked(ranked)
	diversify(ranked, s.cfg.Rank.RedundancyPenalty)
	if s.cfg.Rerank.Enabled {
		semanticRerank(ranked, query, s.words, s.cfg.Rerank.Weight, s.termsOf)
	}
	if ranked, err = s.withMetadata(ctx, f, ranked[:min(k, len(ranked))]); err != nil {
		return typeRecall{}, err
	}
	return typeRecall{ranked: ranked, best: keyword}, nil
}

// keywordScaled reports whether a recall in mode scores relative to its best
// keyword match: BM25 alone, or hybrid with the keyword-led fusion.
func (s *Service) keywordScaled(mode vectorstore.Mode) bool {
	return mode == vectorstore.Sparse || s.keywordLed(mode)
}

// keywordLed reports whether a recall in mode fuses a keyword and a dense search
// itself (fuseKeywordLed) rather than asking the store for its hybrid search.
func (s *Service) keywordLed(mode vectorstore.Mode) bool {
	return mode == vectorstore.Hybrid && s.cfg.Rank.Fusion == FusionKeyword
}

// fusionDepth is how deep, as a multiple of the candidates wanted, each side of
// the keyword-led fusion looks: a memory ranked moderately by both sides can
// overtake one ranked first by one side only.
const fusionDepth = 2

// fuseKeywordLed is the hybrid search of q with FusionKeyword: a keyword and a
// dense search, fusionDepth × want deep each, side by side, and their union
// scored
//
//	BM25 / best BM25 + DenseWeight × max(0, cos − DenseFloor) / (nearest cos − DenseFloor)
//
// (a side that did not find a memory adds 0), best first, ties by id, cut to
// want. It returns the best BM25 score too (0 when nothing shares a word with
// the query), which puts the types on one scale (onOneScale). Both sides are
// relative to their best candidate, as no absolute BM25 or cosine means the
// same from query to query or model to model; the floor keeps memories about
// nothing in particular from gaining on the dense side.
func (s *Service) fuseKeywordLed(ctx context.Context, q vectorstore.Query, want int, now time.Time) ([]vectorstore.Hit, float64, error) {
	sparse, dense := q, q
	sparse.Mode, sparse.Vector = vectorstore.Sparse, nil
	dense.Mode, dense.Text, dense.Expansion = vectorstore.Dense, "", nil
	var (
		lists [2][]vectorstore.Hit
		errs  [2]error
		wg    sync.WaitGroup
	)
	for i, side := range []vectorstore.Query{sparse, dense} {
		wg.Go(func() { lists[i], errs[i] = s.searchLive(ctx, side, fusionDepth*want, now) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, 0, err
	}
	keywordHits, denseHits := lists[0], lists[1]
	at := make(map[string]int, len(keywordHits)+len(denseHits))
	out := make([]vectorstore.Hit, 0, len(keywordHits)+len(denseHits))
	add := func(h vectorstore.Hit, score float64) {
		if i, ok := at[h.Record.ID]; ok {
			out[i].Score += score
			return
		}
		at[h.Record.ID] = len(out)
		h.Score = score
		out = append(out, h)
	}
	best := 0.0
	if len(keywordHits) > 0 {
		best = keywordHits[0].Score
	}
	for _, h := range keywordHits {
		add(h, h.Score/best)
	}
	floor := s.cfg.Rank.DenseFloor
	for _, h := range denseHits {
		near := 0.0
		if nearest := denseHits[0].Score; nearest > floor {
			near = max(0, h.Score-floor) / (nearest - floor)
		}
		add(h, s.cfg.Rank.DenseWeight*near)
	}
	slices.SortFunc(out, func(a, b vectorstore.Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Record.ID, b.Record.ID)
	})
	return out[:min(want, len(out))], best, nil
}

// typeRecall is one type's share of a recall: its ranked records and, when the
// scores are relative to the best keyword match (keywordScaled), the raw BM25
// score they are relative to (0: no keyword match, every record came from the
// dense side).
type typeRecall struct {
	ranked []Ranked
	best   float64
}

// onOneScale puts the types' sparse-mode scores on one scale. Each type's
// relevance is its BM25 score over the type's best, but the BM25 corpus is the
// user's whole partition, so raw scores compare across types: rescaled to the
// best of all types, a semantic fact that matches the query weakly no longer
// ranks with the best episode just because it is the best fact (interleaving by
// per-type relevance cost LoCoMo recall@10 six points, BENCHMARKS.md). A type
// without a keyword match keeps its dense fill under every keyword match. The
// scores are linear in relevance, so rescaling them is exact.
func onOneScale(types []typeRecall) {
	best, weakest := 0.0, math.Inf(1)
	for _, tr := range types {
		best = max(best, tr.best)
		if tr.best > 0 && len(tr.ranked) > 0 {
			weakest = min(weakest, tr.ranked[len(tr.ranked)-1].Score*tr.best)
		}
	}
	if best == 0 {
		return
	}
	for _, tr := range types {
		factor := tr.best / best
		if tr.best == 0 {
			factor = weakest / best / 2
		}
		for i := range tr.ranked {
			tr.ranked[i].Score *= factor
		}
	}
}

// denseFill appends the dense hits not already ranked, with a relevance scaled
// under the weakest ranked one.
func (s *Service) denseFill(ctx context.Context, f vectorstore.Filter, vec []float32, want int, now time.Time, ranked []Ranked) ([]Ranked, error) {
	dense, err := s.searchLive(ctx, vectorstore.Query{Filter: f, Vector: vec, Mode: vectorstore.Dense, WithoutMetadata: true}, want, now)
	if err != nil {
		return nil, err
	}
	ceiling := 1.0
	if n := len(ranked); n > 0 {
		ceiling = ranked[n-1].Score / 2 // under the weakest keyword match, whatever its bonuses
	}
	seen := make(map[string]bool, len(ranked))
	for _, r := range ranked {
		seen[r.Record.ID] = true
	}
	for _, h := range dense {
		if len(ranked) == want {
			break
		}
		if seen[h.Record.ID] || h.Score <= 0 {
			continue
		}
		score := s.cfg.Rank.Score(min(1, h.Score), now.Sub(h.Record.TS), h.Record.HitCount)
		ranked = append(ranked, Ranked{Record: h.Record, Score: ceiling * score / s.cfg.Rank.Score(1, 0, math.MaxInt32)})
	}
	return ranked, nil
}

// withMetadata replaces ranked's records (searched without metadata) by the
// stored records, metadata included. A record deleted since the search is
// dropped, as a search a moment later would not have found it.
func (s *Service) withMetadata(ctx context.Context, f vectorstore.Filter, ranked []Ranked) ([]Ranked, error) {
	if len(ranked) == 0 {
		return ranked, nil
	}
	ids := make([]string, len(ranked))
	for i, r := range ranked {
		ids[i] = r.Record.ID
	}
	recs, err := s.vectors.Get(ctx, f.Tenant, f.UserID, ids...)
	if err != nil {
		return nil, storeErr("get", err)
	}
	byID := make(map[string]int, len(recs)) // indexes: a Record is too large to copy twice
	for i, r := range recs {
		byID[r.ID] = i
	}
	kept := ranked[:0]
	for _, r := range ranked {
		if i, ok := byID[r.Record.ID]; ok {
			r.Record = recs[i]
			kept = append(kept, r)
		}
	}
	return kept, nil
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

// diversify re-ranks rs (sorted best first) so that a memory repeating a better
// one gives way: picking greedily, each candidate's score is lowered by
// penalty × the largest share of its lines that one already picked memory has.
// An episode keeps the messages said before it, so the episodes of neighbouring
// messages share most of their lines; without this the first places go to three
// windows over one spot of a conversation, and evidence from other sessions
// (what a multi-hop question needs) falls out of the top k. A memory that only
// partly repeats another keeps most of its score, and one repeating nothing
// keeps all of it, so the order of distinct memories never changes.
func diversify(rs []Ranked, penalty float64) {
	if len(rs) < 2 || penalty <= 0 {
		return
	}
	lines := make([][]string, len(rs))
	for i, r := range rs {
		lines[i] = textLines(r.Record.Text)
	}
	// Selection sort by adjusted score: each step takes the best remaining
	// candidate after penalising it against the ones already taken.
	redundancy := make([]float64, len(rs))
	for next := range rs {
		if next > 0 {
			for j := next; j < len(rs); j++ {
				redundancy[j] = max(redundancy[j], overlap(lines[j], lines[next-1]))
			}
		}
		best := next
		for j := next + 1; j < len(rs); j++ {
			if adjusted(rs[j].Score, redundancy[j], penalty) > adjusted(rs[best].Score, redundancy[best], penalty) {
				best = j
			}
		}
		rs[next], rs[best] = rs[best], rs[next]
		lines[next], lines[best] = lines[best], lines[next]
		redundancy[next], redundancy[best] = redundancy[best], redundancy[next]
	}
	for i := range rs {
		rs[i].Score = adjusted(rs[i].Score, redundancy[i], penalty)
	}
	sortRanked(rs)
}

func adjusted(score, redundancy, penalty float64) float64 { return score * (1 - penalty*redundancy) }

// textLines are the non-blank lines of a memory's text, trimmed.
func textLines(text string) []string {
	var out []string
	for l := range strings.Lines(text) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// overlap is the share of a's lines that b also has.
func overlap(a, b []string) float64 {
	if len(a) == 0 {
		return 0
	}
	n := 0
	for _, l := range a {
		if slices.Contains(b, l) {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

// speakerBonus raises by weight the score of each memory whose speaker the query
// names ("What does Melanie do to relax?" favours what Melanie said): in a
// conversation between named people, what a person says about themselves is
// the answer to a question about them far more often than what is said to
// them (96% of LoCoMo's evidence turns are by a person the question names),
// while both sides' messages match the name, because an episode's lines carry
// their speakers. A query naming nobody, or memories without a speaker (an
// agent's user and assistant have roles, not names), change nothing.
func speakerBonus(rs []Ranked, query string, weight float64) {
	if weight <= 0 {
		return
	}
	terms := map[string]bool{}
	for _, t := range bm25.Tokenize(query) {
		terms[t] = true
	}
	named := map[string]bool{}
	for i, r := range rs {
		if r.Record.Who == "" {
			continue
		}
		is, ok := named[r.Record.Who]
		if !ok {
			who := bm25.Tokenize(r.Record.Who)
			is = len(who) > 0 && !slices.ContainsFunc(who, func(t string) bool { return !terms[t] })
			named[r.Record.Who] = is
		}
		if is {
			rs[i].Score *= 1 + weight
		}
	}
}
