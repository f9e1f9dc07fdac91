package retrieve

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
)

func packItem(kind events.PackItemKind, id, text string, score float64) events.PackItem {
	return events.PackItem{ID: id, Kind: kind, Text: text, Score: score}
}

// The budget is filled by priority: core always, then the topic, then the ranked
// memories (facts and episodes together by score), then chunks, then the session.
func TestRenderFillsTheBudgetByPriority(t *testing.T) {
	long := strings.Repeat("x", 400) // 100 tokens
	pack := events.ContextPack{
		Core:          &events.PackItem{Kind: events.PackKindCore, Text: "# Memory\n\ncore line"},
		Topics:        []events.PackItem{packItem(events.PackKindTopic, "user_prefs", "prefers light theme", 0)},
		SemanticItems: []events.PackItem{packItem(events.PackKindSemantic, "f1", "fact one "+long, 0.9), packItem(events.PackKindSemantic, "f2", "fact two "+long, 0.2)},
		EpisodicItems: []events.PackItem{packItem(events.PackKindEpisodic, "e1", "episode one "+long, 0.5)},
		Chunks:        []events.PackItem{packItem(events.PackKindChunk, "MEMORY.md#L1-2", "chunk "+long, 3)},
		RecentEvents: []events.EventRecord{{EventID: "x", Type: events.TypeObservation, TS: time.Unix(0, 0),
			Obs: &events.Observation{Role: events.RoleUser, Text: "latest message"}}},
	}
	render(&pack, 250, noShares) // core, topic, f1 and e1 (238 tokens); not f2 nor the chunk; the message fits after
	if len(pack.SemanticItems) != 1 || pack.SemanticItems[0].ID != "f1" || len(pack.EpisodicItems) != 1 || len(pack.Chunks) != 0 {
		t.Fatalf("kept facts %v, episodes %v, chunks %v; want f1, e1 and no chunk", pack.SemanticItems, pack.EpisodicItems, pack.Chunks)
	}
	if len(pack.Topics) != 1 || len(pack.RecentEvents) != 1 {
		t.Errorf("topic %d, recent %d; want both kept", len(pack.Topics), len(pack.RecentEvents))
	}
	if pack.TokenEstimate > 250 || pack.BudgetTokens != 250 {
		t.Errorf("estimate %d, budget %d; want ≤ 250 and 250", pack.TokenEstimate, pack.BudgetTokens)
	}
	want := map[string][2]int{"core": {1, 0}, "topics": {1, 0}, "semantic_items": {1, 1}, "episodic_items": {1, 0}, "chunks": {0, 1}, "recent_events": {1, 0}}
	for _, s := range pack.Sections {
		if w, ok := want[s.Name]; !ok || s.Entries != w[0] || s.Dropped != w[1] {
			t.Errorf("section %+v, want entries/dropped %v", s, w)
		}
		delete(want, s.Name)
	}
	if len(want) > 0 {
		t.Errorf("sections missing: %v", want)
	}
}

// Properties of any pack and budget: the prompt is within the budget unless the
// core alone is over it; the sections' tokens add up to the estimate (each rounds
// up, so at most one more per section); every kept entry is in the prompt; a
// ranked memory is only left out when every better one that would fit is kept.
func TestRenderBudgetProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringMatching(`[a-z ]{1,300}`)
		pack := events.ContextPack{}
		if rapid.Bool().Draw(t, "core") {
			pack.Core = &events.PackItem{Kind: events.PackKindCore, Text: text.Draw(t, "core text")}
		}
		n := rapid.IntRange(0, 12).Draw(t, "facts")
		for i := range n {
			pack.SemanticItems = append(pack.SemanticItems, packItem(events.PackKindSemantic, fmt.Sprintf("f%02d", i), fmt.Sprintf("f%d %s", i, text.Draw(t, "fact")), float64(n-i)))
		}
		m := rapid.IntRange(0, 12).Draw(t, "episodes")
		for i := range m {
			pack.EpisodicItems = append(pack.EpisodicItems, packItem(events.PackKindEpisodic, fmt.Sprintf("e%02d", i), fmt.Sprintf("e%d %s", i, text.Draw(t, "episode")), float64(m-i)-0.5))
		}
		for i := range rapid.IntRange(0, 5).Draw(t, "chunks") {
			pack.Chunks = append(pack.Chunks, packItem(events.PackKindChunk, fmt.Sprintf("c%d", i), fmt.Sprintf("c%d %s", i, text.Draw(t, "chunk")), 1))
		}
		budget := rapid.IntRange(1, 2000).Draw(t, "budget")
		coreTokens := 0
		if pack.Core != nil {
			coreTokens = (len("## Core memory\n\n") + len(pack.Core.Text) + 1 + 3) / 4 // the entry's "\n\n" less the trimmed last newline
		}
		render(&pack, budget, noShares)
		if pack.TokenEstimate > max(budget, coreTokens) {
			t.Fatalf("estimate %d over budget %d (core %d)", pack.TokenEstimate, budget, coreTokens)
		}
		sum := 0
		for _, s := range pack.Sections {
			sum += s.Tokens
		}
		if sum < pack.TokenEstimate || sum > pack.TokenEstimate+len(pack.Sections) {
			t.Fatalf("sections add up to %d tokens, estimate %d: %+v", sum, pack.TokenEstimate, pack.Sections)
		}
		for _, l := range [][]events.PackItem{pack.SemanticItems, pack.EpisodicItems, pack.Chunks} {
			for _, it := range l {
				if !strings.Contains(pack.Prompt, it.Text) {
					t.Fatalf("kept %s is not in the prompt", it.ID)
				}
			}
		}
		// Facts are ranked best first: a kept fact's better ones are kept, unless
		// longer than it (they did not fit when it did).
		for i := 1; i < len(pack.SemanticItems); i++ {
			if pack.SemanticItems[i].Score > pack.SemanticItems[i-1].Score {
				t.Fatalf("facts out of order: %v", pack.SemanticItems)
			}
		}
	})
}
