package memory

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/wordvec"
)

// ExpansionConfig tunes the query expansion: each word of a recall's query
// brings the words of the user's own memories that mean nearly the same
// (pkg/wordvec's neighbours: "instruments" brings "guitar", "pets" brings
// "dog") into the keyword search, at a lower weight, so that a memory sharing
// no word with the question can still be found. Alone it changed LoCoMo
// recall@10 by less than the run-to-run spread; with RerankConfig, which orders
// what it brings, by about a point (BENCHMARKS.md). Zero fields take the
// defaults.
type ExpansionConfig struct {
	// Enabled turns the expansion on.
	Enabled bool
	// MinSim is the least similarity (cosine of word vectors) of a word added;
	// default 0.5.
	MinSim float64
	// PerTerm is how many words at most each query word adds, the most similar
	// of those the user's memories hold; default 5.
	PerTerm int
	// Weight scales an added word's similarity into its weight in the search (a
	// query's own words weigh 1); default 0.3.
	Weight float64
	// MinRank leaves the query words among the MinRank most frequent English
	// terms unexpanded ("relationship", "time", "make"): their neighbours are
	// as vague as they are; default 2000.
	MinRank int
	// MinNeighbourRank keeps the MinNeighbourRank most frequent terms out of
	// the words added ("want", "really"); default 500.
	MinNeighbourRank int
}

func (c *ExpansionConfig) setDefaults() {
	if c.MinSim == 0 {
		c.MinSim = 0.5
	}
	if c.PerTerm == 0 {
		c.PerTerm = 5
	}
	if c.Weight == 0 {
		c.Weight = 0.3
	}
	if c.MinRank == 0 {
		c.MinRank = 2000
	}
	if c.MinNeighbourRank == 0 {
		c.MinNeighbourRank = 500
	}
}

func (c ExpansionConfig) validate() []error {
	var errs []error
	if !finite(c.MinSim) || c.MinSim <= 0 || c.MinSim > 1 {
		errs = append(errs, fmt.Errorf("Expansion.MinSim is %v, want a number in (0, 1]", c.MinSim))
	}
	if c.PerTerm < 1 {
		errs = append(errs, fmt.Errorf("Expansion.PerTerm is %d, want >= 1", c.PerTerm))
	}
	if !finite(c.Weight) || c.Weight <= 0 || c.Weight > 1 {
		errs = append(errs, fmt.Errorf("Expansion.Weight is %v, want a number in (0, 1]", c.Weight))
	}
	if c.MinRank < 0 {
		errs = append(errs, fmt.Errorf("Expansion.MinRank is %d, want >= 0", c.MinRank))
	}
	if c.MinNeighbourRank < 0 {
		errs = append(errs, fmt.Errorf("Expansion.MinNeighbourRank is %d, want >= 0", c.MinNeighbourRank))
	}
	return errs
}

// Expand returns the words query is expanded with in the partition of base
// (tenant and user): for each expandable word of query, its neighbours in
// words that are at least MinSim similar, not among the MinNeighbourRank most
// frequent terms, not already in query, and held by the partition's memories
// (any, when the store cannot tell: see vectorstore.Store.TermDocs); the
// PerTerm most similar, each weighing Weight × its similarity (the largest, for
// a word two query words bring). Not expandable: names (a capitalised word
// other than the first: a name's neighbours are other names), the MinRank most
// frequent terms, and words the table does not know, which includes every word
// not in English. cfg has its defaults set.
func Expand(ctx context.Context, store vectorstore.Store, words *wordvec.Table, cfg ExpansionConfig, base vectorstore.Filter, query string) ([]vectorstore.WeightedTerm, error) {
	own := map[string]bool{}
	for _, t := range bm25.Tokenize(query) {
		own[t] = true
	}
	var sources [][]wordvec.Neighbour // per expandable query word, its eligible neighbours
	var candidates []string
	seen := map[string]bool{}
	for _, t := range expandable(query) {
		if rank, ok := words.Rank(t); !ok || rank < cfg.MinRank || seen[t] {
			continue
		}
		seen[t] = true
		var nbrs []wordvec.Neighbour
		for _, n := range words.Neighbours(t) {
			if n.Sim < cfg.MinSim {
				break // best first
			}
			if rank, _ := words.Rank(n.Term); own[n.Term] || rank < cfg.MinNeighbourRank {
				continue
			}
			nbrs = append(nbrs, n)
			if !seen[n.Term] && len(candidates) < vectorstore.MaxExpansion {
				seen[n.Term] = true
				candidates = append(candidates, n.Term)
			}
		}
		sources = append(sources, nbrs)
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	docs, err := store.TermDocs(ctx, base.Tenant, base.UserID, candidates)
	if err != nil {
		return nil, storeErr("expand query", err)
	}
	held := make(map[string]bool, len(candidates))
	for i, c := range candidates {
		held[c] = docs == nil || docs[i] > 0
	}
	weight := map[string]float64{}
	var out []vectorstore.WeightedTerm
	for _, nbrs := range sources {
		taken := 0
		for _, n := range nbrs {
			if taken == cfg.PerTerm {
				break
			}
			if !held[n.Term] {
				continue
			}
			taken++
			w := cfg.Weight * n.Sim
			if old, ok := weight[n.Term]; !ok {
				out = append(out, vectorstore.WeightedTerm{Term: n.Term, Weight: w})
			} else if w <= old {
				continue
			}
			weight[n.Term] = w
		}
	}
	for i := range out {
		out[i].Weight = weight[out[i].Term]
	}
	return out, nil
}

// expandable returns the terms of query's words that are not names: a word
// starting with an upper-case letter, other than the query's first, names
// someone or something ("What does Melanie paint?").
func expandable(query string) []string {
	var terms []string
	for i, w := range strings.FieldsFunc(query, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	}) {
		if r := []rune(w)[0]; i > 0 && unicode.IsUpper(r) {
			continue
		}
		terms = append(terms, bm25.Tokenize(w)...)
	}
	return terms
}
