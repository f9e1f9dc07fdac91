package memory_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func defaultRank() memory.RankConfig {
	return memory.RankConfig{RecencyHalfLife: 30 * 24 * time.Hour, RecencyWeight: 0.15, HitWeight: 0.05}
}

func TestScoreFormula(t *testing.T) {
	c := defaultRank()
	cases := []struct {
		rel  float64
		age  time.Duration
		hits int
		want float64
	}{
		{1, 0, 0, 1.15},
		{1, 30 * 24 * time.Hour, 0, 1.075},
		{0.5, 60 * 24 * time.Hour, 0, 0.5 * (1 + 0.15/4)},
		{1, -time.Hour, 0, 1.15}, // ahead of the clock counts as fresh
		{1, 0, 9, 1.15 + 0.05*math.Log(10)},
		{0, 0, 1000, 0},
	}
	for _, tc := range cases {
		if got := c.Score(tc.rel, tc.age, tc.hits); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Score(%v, %s, %d) = %v, want %v", tc.rel, tc.age, tc.hits, got, tc.want)
		}
	}
	if got := memory.Relevance(2.0 / 61); got != 1 {
		t.Errorf("Relevance(best) = %v, want 1", got)
	}
	if got := memory.Relevance(1.0 / 61); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("Relevance(first on one side) = %v, want 0.5", got)
	}
}

// TestPropertyScoreIsMonotone: raising the hit count, making a memory more
// recent or more relevant never lowers its score, under any valid RankConfig.
func TestPropertyScoreIsMonotone(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := memory.RankConfig{
			RecencyHalfLife: time.Duration(rapid.Int64Range(int64(time.Minute), int64(10*365*24*time.Hour)).Draw(rt, "halfLife")),
			RecencyWeight:   rapid.Float64Range(0, 2).Draw(rt, "recencyWeight"),
			HitWeight:       rapid.Float64Range(0, 2).Draw(rt, "hitWeight"),
		}
		rel := rapid.Float64Range(0, 1).Draw(rt, "relevance")
		age := time.Duration(rapid.Int64Range(-int64(24*time.Hour), int64(5*365*24*time.Hour)).Draw(rt, "age"))
		hits := rapid.IntRange(0, 1_000_000).Draw(rt, "hits")
		base := c.Score(rel, age, hits)
		if more := c.Score(rel, age, hits+rapid.IntRange(0, 1000).Draw(rt, "moreHits")); more < base {
			rt.Fatalf("more hits lowered the score: %v < %v", more, base)
		}
		younger := age - time.Duration(rapid.Int64Range(0, int64(365*24*time.Hour)).Draw(rt, "younger"))
		if s := c.Score(rel, younger, hits); s < base {
			rt.Fatalf("a more recent memory scored lower: %v < %v", s, base)
		}
		if s := c.Score(min(1, rel+rapid.Float64Range(0, 1).Draw(rt, "moreRelevant")), age, hits); s < base {
			rt.Fatalf("a more relevant memory scored lower: %v < %v", s, base)
		}
	})
}

// TestRecencyAndHitsBreakNearTies: of two memories about equally relevant to the
// query, the more recent one, and the more used one, ranks first — whichever of
// the two the relevance alone prefers.
func TestRecencyAndHitsBreakNearTies(t *testing.T) {
	texts := [2]string{"I drink green tea every morning", "I drink green tea every evening"}
	for _, favoured := range []int{0, 1} {
		t.Run(fmt.Sprintf("recent=%d", favoured), func(t *testing.T) {
			f := newFixture(t, memory.Config{})
			ctx := context.Background()
			ids := [2]string{}
			for _, i := range []int{1 - favoured, favoured} { // the favoured one is added a year later
				add, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: texts[i]})
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = add.MemoryIDs[0]
				if i != favoured {
					f.clock.Advance(365 * 24 * time.Hour)
				}
			}
			ranked, err := f.svc.Recall(ctx, "acme", "u1", "green tea", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ranked) != 2 || ranked[0].Record.ID != ids[favoured] {
				t.Fatalf("ranked %v first, want the recent %q", ranked[0].Record.Text, texts[favoured])
			}
		})
		t.Run(fmt.Sprintf("hits=%d", favoured), func(t *testing.T) {
			f := newFixture(t, memory.Config{})
			ctx := context.Background()
			ids := [2]string{}
			for i, text := range texts {
				add, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: text})
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = add.MemoryIDs[0]
			}
			if err := f.store.UpdatePayload(ctx, "acme", "u1", ids[favoured], vectorstore.Patch{HitCountDelta: 10}); err != nil {
				t.Fatal(err)
			}
			ranked, err := f.svc.Recall(ctx, "acme", "u1", "green tea", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ranked) != 2 || ranked[0].Record.ID != ids[favoured] {
				t.Fatalf("ranked %v first, want the used %q", ranked[0].Record.Text, texts[favoured])
			}
		})
	}
}

// TestPropertyRecallHitsNeverLowerScore: through the whole recall path, raising a
// memory's hit count never lowers its score.
func TestPropertyRecallHitsNeverLowerScore(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	words := []string{"tea", "coffee", "berlin", "cats", "hiking", "sales"}
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		user := fmt.Sprintf("u%d", n)
		for i := range rapid.IntRange(1, 6).Draw(rt, "records") {
			text := fmt.Sprintf("I like %v %d", rapid.SliceOfN(rapid.SampledFrom(words), 1, 3).Draw(rt, "words"), i)
			if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: user, Text: text}); err != nil {
				rt.Fatal(err)
			}
			f.clock.Advance(time.Duration(rapid.IntRange(0, 1000).Draw(rt, "hours")) * time.Hour)
		}
		query := rapid.SampledFrom(words).Draw(rt, "query")
		before, err := f.svc.Recall(ctx, "acme", user, query, nil, nil)
		if err != nil {
			rt.Fatal(err)
		}
		target := before[rapid.IntRange(0, len(before)-1).Draw(rt, "target")]
		if err := f.store.UpdatePayload(ctx, "acme", user, target.Record.ID, vectorstore.Patch{HitCountDelta: rapid.IntRange(1, 50).Draw(rt, "hits")}); err != nil {
			rt.Fatal(err)
		}
		after, err := f.svc.Recall(ctx, "acme", user, query, nil, nil)
		if err != nil {
			rt.Fatal(err)
		}
		for _, r := range after {
			if r.Record.ID == target.Record.ID {
				if r.Score < target.Score {
					rt.Fatalf("score fell from %v to %v after hits", target.Score, r.Score)
				}
				return
			}
		}
		rt.Fatalf("memory %s dropped out of the results after hits", target.Record.ID)
	})
}

// Keyword-first ranking (RankConfig.Mode sparse, for a lexical embedder): memories
// sharing a word with the query rank first by BM25; one sharing none is still found
// by the embedder ("study" / "student") and ranks below every keyword match.
func TestSparseModeFallsBackToDenseBelowKeywordMatches(t *testing.T) {
	f := newFixture(t, memory.Config{Rank: memory.RankConfig{Mode: vectorstore.Sparse}})
	ctx := context.Background()
	add := func(text string) string {
		rep, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return rep.MemoryIDs[0]
	}
	student := add("I'm a student at Peking University")
	dog := add("My dog Rex loves the university park")

	ranked, err := f.svc.Recall(ctx, "acme", "u1", "where do I study?", []vectorstore.MemoryType{vectorstore.Episodic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranked) == 0 || ranked[0].Record.ID != student {
		t.Fatalf("no shared word: %d ranked, want the student memory first (found by the embedder)", len(ranked))
	}
	ranked, err = f.svc.Recall(ctx, "acme", "u1", "Rex studies", []vectorstore.MemoryType{vectorstore.Episodic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranked) != 2 || ranked[0].Record.ID != dog || !(ranked[1].Score < ranked[0].Score) {
		var texts []string
		for _, r := range ranked {
			texts = append(texts, fmt.Sprintf("%q %.3f", r.Record.Text, r.Score))
		}
		t.Fatalf("ranked %v; want the keyword match (Rex) first and the n-gram match (student) below it", texts)
	}
}

// In sparse mode the types share one BM25 scale: the best fact of a query that
// shares only a name with it does not rank with the episode that answers it, as
// it would if each type's best were its own 1.0.
func TestSparseModeRanksTypesOnOneScale(t *testing.T) {
	f := newFixture(t, memory.Config{Rank: memory.RankConfig{Mode: vectorstore.Sparse}})
	ctx := context.Background()
	add := func(text string, typ events.MemoryType) string {
		rep, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: text, MemoryType: typ, ChatID: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		return rep.MemoryIDs[0]
	}
	episode := add("Caroline: I went to the LGBTQ support group yesterday and it was powerful.", events.MemoryEpisodic)
	add("Melanie: The kids loved the beach trip.", events.MemoryEpisodic)
	fact := add("Caroline likes brunch.", events.MemorySemantic)

	ranked, err := f.svc.Recall(ctx, "acme", "u1", "When did Caroline go to the LGBTQ support group?", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	score := map[string]float64{}
	for _, r := range ranked {
		score[r.Record.ID] = r.Score
	}
	if len(ranked) == 0 || ranked[0].Record.ID != episode {
		t.Fatalf("ranked %v, want the support-group episode first", score)
	}
	if s, ok := score[fact]; !ok || !(s < score[episode]/2) {
		t.Fatalf("fact scored %v (found %v) against the episode's %v; want it recalled, under half the episode's score", s, ok, score[episode])
	}
}

// Episodes of neighbouring messages share lines; the one repeating a better
// memory gives way to a distinct one of slightly lower relevance, and a
// question naming a speaker favours what that speaker said.
func TestRecallPrefersDistinctMemoriesAndTheNamedSpeaker(t *testing.T) {
	f := newFixture(t, memory.Config{Rank: memory.RankConfig{Mode: vectorstore.Sparse}})
	ctx := context.Background()
	add := func(who, text string) string {
		rep, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: text, ChatID: "c1", Who: who})
		if err != nil {
			t.Fatal(err)
		}
		return rep.MemoryIDs[0]
	}
	first := add("Mel", "Caro: Any plans for the weekend?\nMel: We are going camping at the lake.")
	repeat := add("Caro", "Caro: Any plans for the weekend?\nMel: We are going camping at the lake.\nCaro: Camping sounds fun!")
	other := add("Mel", "Mel: Last summer we went camping in the mountains.")

	ranked, err := f.svc.Recall(ctx, "acme", "u1", "Where did Mel go camping?", []vectorstore.MemoryType{vectorstore.Episodic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range ranked {
		order = append(order, map[string]string{first: "first", repeat: "repeat", other: "other"}[r.Record.ID])
	}
	if fmt.Sprint(order) != "[first other repeat]" {
		t.Fatalf("ranked %v; want the two distinct memories of Mel before the one repeating the first", order)
	}
}
