package memory_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/wordvec"
)

// TestExpansionFindsASynonym: "instruments" shares no word with "guitar"; with
// the expansion on, the guitar memory is the best answer (its neighbour
// "guitar" adds to the name all match), with it off a shorter memory that only
// names Melanie wins.
func TestExpansionFindsASynonym(t *testing.T) {
	const target = "Melanie practises the guitar every single evening after her long shift at the office."
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("expansion=", on), func(t *testing.T) {
			first := firstRecalled(t, memory.Config{Expansion: memory.ExpansionConfig{Enabled: on}},
				"Which instruments does Melanie own?", target, "Melanie went to the beach.", "Melanie likes the sea.")
			if (first == target) != on {
				t.Errorf("first memory %q; want the guitar memory first only with the expansion on", first)
			}
		})
	}
}

// firstRecalled adds texts as episodic memories of one user and returns the
// text of the best memory recalled for query, ranking by keywords (the offline
// configuration).
func firstRecalled(t *testing.T, cfg memory.Config, query string, texts ...string) string {
	t.Helper()
	cfg.Rank.Mode = vectorstore.Sparse
	f := newFixture(t, cfg)
	ctx := context.Background()
	for _, text := range texts {
		if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: text, ChatID: "c1"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.svc.Recall(ctx, "acme", "u1", query, []vectorstore.MemoryType{vectorstore.Episodic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(texts) {
		t.Fatalf("%d memories, want %d", len(got), len(texts))
	}
	return got[0].Record.Text
}

// TestPropertyExpansionUsesOnlyTheUsersWords: Expand adds only words that the
// user's memories hold (never another user's), never a word of the query
// itself (the query's own words stay as they are, at weight 1), each once, each
// a neighbour of a query word, with a weight in (0, Weight].
func TestPropertyExpansionUsesOnlyTheUsersWords(t *testing.T) {
	f := newFixture(t, memory.Config{})
	words := wordvec.Default()
	// Query words and words near them, so that expansions happen.
	pool := []string{"instruments", "guitar", "piano", "drum", "pets", "dog", "cat", "rabbit", "hobbies", "golf",
		"garden", "painting", "portrait", "mural", "soccer", "tennis", "allergic", "asthma", "sales", "column"}
	cfg := memory.ExpansionConfig{Enabled: true, MinSim: 0.5, PerTerm: 3, Weight: 0.3, MinRank: 1000, MinNeighbourRank: 100}
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		user, other := fmt.Sprintf("u%d", n), fmt.Sprintf("o%d", n)
		vocab := map[string]bool{}
		for i, text := range rapid.SliceOfN(rapid.SliceOfN(rapid.SampledFrom(pool), 1, 4), 0, 6).Draw(rt, "memories") {
			for _, t := range bm25.Tokenize(strings.Join(text, " ")) {
				vocab[t] = true
			}
			if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: user, Text: strings.Join(text, " ") + fmt.Sprint(" note ", i), ChatID: "c1"}); err != nil {
				rt.Fatal(err)
			}
		}
		vocab["note"] = true
		if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: other, Text: strings.Join(pool, " "), ChatID: "c1"}); err != nil {
			rt.Fatal(err)
		}
		query := "What " + strings.Join(rapid.SliceOfN(rapid.SampledFrom(pool), 1, 4).Draw(rt, "query"), " ") + "?"
		got, err := memory.Expand(ctx, f.store, words, cfg, vectorstore.Filter{Tenant: "acme", UserID: user}, query)
		if err != nil {
			rt.Fatal(err)
		}
		own := bm25.Tokenize(query)
		seen := map[string]bool{}
		for _, w := range got {
			if !vocab[w.Term] {
				rt.Fatalf("%q added %q, which no memory of the user holds", query, w.Term)
			}
			if slices.Contains(own, w.Term) || seen[w.Term] {
				rt.Fatalf("%q added %q, a query word or a word added twice", query, w.Term)
			}
			seen[w.Term] = true
			if !(w.Weight > 0 && w.Weight <= cfg.Weight) {
				rt.Fatalf("%q added %q at weight %v, want (0, %v]", query, w.Term, w.Weight, cfg.Weight)
			}
			near := slices.ContainsFunc(own, func(q string) bool {
				return slices.ContainsFunc(words.Neighbours(q), func(n wordvec.Neighbour) bool { return n.Term == w.Term })
			})
			if !near {
				rt.Fatalf("%q added %q, a neighbour of no query word", query, w.Term)
			}
		}
	})
}

// TestExpansionLeavesNamesAndOtherScripts: a name's neighbours are other names,
// and a word of another language has no vector: neither is expanded.
func TestExpansionLeavesNamesAndOtherScripts(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	for _, text := range []string{"Michael and David met Paul.", "销售报表 每月 更新"} {
		if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: text, ChatID: "c1"}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := memory.ExpansionConfig{Enabled: true, MinSim: 0.4, PerTerm: 10, Weight: 0.3, MinRank: 1, MinNeighbourRank: 1}
	for _, q := range []string{"What did John say?", "销售报表在哪里?"} {
		got, err := memory.Expand(ctx, f.store, wordvec.Default(), cfg, vectorstore.Filter{Tenant: "acme", UserID: "u1"}, q)
		if err != nil || len(got) != 0 {
			t.Errorf("Expand(%q) = %v, %v; want nothing", q, got, err)
		}
	}
}

// TestRerankFavoursTheMeaning: both memories match only the name; the
// shorter wins on keywords, and with the re-ranking the one about what the
// question asks (hobbies: painting, pottery) wins instead.
func TestRerankFavoursTheMeaning(t *testing.T) {
	const hobby = "Melanie: I love painting landscapes and making pottery with my kids on weekends."
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("rerank=", on), func(t *testing.T) {
			first := firstRecalled(t, memory.Config{Rerank: memory.RerankConfig{Enabled: on}},
				"What hobbies does Melanie enjoy?", hobby, "Melanie: The bank called about my mortgage.")
			if (first == hobby) != on {
				t.Errorf("first memory %q; want the hobby first only with the re-ranking on", first)
			}
		})
	}
}
