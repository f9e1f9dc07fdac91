package memory

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// diversify only lowers scores, keeps every memory, and lowers none whose
// lines no better memory has: among memories that repeat nothing, the order
// is the one their scores gave.
func TestPropertyDiversifyOnlyDemotesRepeats(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(rt, "n")
		penalty := rapid.Float64Range(0, 1).Draw(rt, "penalty")
		rs := make([]Ranked, n)
		for i := range rs {
			lines := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g"}), 1, 3).Draw(rt, "lines")
			rs[i] = Ranked{Record: vectorstore.Record{ID: fmt.Sprintf("m%02d", i), Text: strings.Join(lines, "\n")}, Score: rapid.Float64Range(0, 2).Draw(rt, "score")}
		}
		sortRanked(rs)
		before := map[string]Ranked{}
		for _, r := range rs {
			before[r.Record.ID] = r
		}
		diversify(rs, penalty)
		if len(rs) != n {
			t.Fatalf("%d memories after diversify, want %d", len(rs), n)
		}
		for i, r := range rs {
			if r.Score > before[r.Record.ID].Score {
				t.Fatalf("%s scored %v, above its %v", r.Record.ID, r.Score, before[r.Record.ID].Score)
			}
			if i > 0 && r.Score > rs[i-1].Score {
				t.Fatalf("not sorted at %d", i)
			}
		}
		// A memory sharing no line with any other keeps its score.
		for _, r := range rs {
			lines := textLines(r.Record.Text)
			alone := !slices.ContainsFunc(rs, func(o Ranked) bool {
				return o.Record.ID != r.Record.ID && overlap(lines, textLines(o.Record.Text)) > 0
			})
			if alone && r.Score != before[r.Record.ID].Score {
				t.Fatalf("%s repeats nothing but went from %v to %v", r.Record.ID, before[r.Record.ID].Score, r.Score)
			}
		}
	})
}

func TestSpeakerBonusNeedsTheWholeName(t *testing.T) {
	rs := []Ranked{
		{Record: vectorstore.Record{ID: "a", Who: "Anna Berg"}, Score: 1},
		{Record: vectorstore.Record{ID: "b", Who: "Anna"}, Score: 1},
		{Record: vectorstore.Record{ID: "c", Who: "user"}, Score: 1},
		{Record: vectorstore.Record{ID: "d"}, Score: 1},
	}
	speakerBonus(rs, "What did Anna say about the trip?", 0.5)
	var got []float64
	for _, r := range rs {
		got = append(got, r.Score)
	}
	if fmt.Sprint(got) != "[1 1.5 1 1]" {
		t.Fatalf("scores %v; want only the memory of the speaker the query names (Anna) raised by half", got)
	}
}
