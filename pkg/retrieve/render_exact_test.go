package retrieve

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentmem/agentmem/events"
)

// tokensOf is the estimate of s: its runes / 4, rounded up.
func tokensOf(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

// exactPack has one entry in each rendered list but the agent and tenant
// scopes, with texts whose lengths add up to a multiple of four runes.
func exactPack() events.ContextPack {
	item := func(key string) events.MemoryItem {
		return events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemFact, Key: key, Content: "content of " + key, Confidence: 1}
	}
	return events.ContextPack{
		Core:           &events.PackItem{Kind: events.PackKindCore, Text: "# Memory\ncore line\n"},
		Persona:        []events.MemoryItem{item("persona")},
		UserProfile:    []events.MemoryItem{item("profile")},
		SessionItems:   []events.MemoryItem{item("session")},
		Topics:         []events.PackItem{{ID: "user_prefs", Kind: events.PackKindTopic, Text: "prefers tea\n"}},
		SemanticItems:  []events.PackItem{{ID: "f1", Kind: events.PackKindSemantic, Text: "a fact", Score: 0.9}},
		EpisodicItems:  []events.PackItem{{ID: "e1", Kind: events.PackKindEpisodic, Text: "an episode", Context: []string{"Ana: hi"}, Score: 0.5}},
		Chunks:         []events.PackItem{{ID: "MEMORY.md#L1-2", Kind: events.PackKindChunk, Text: "a chunk"}},
		SessionSummary: "the summary",
		RecentEvents:   []events.EventRecord{message(0), message(1)},
		DailyNotes:     []events.PackItem{{ID: "202611/20261122.md", Kind: events.PackKindDailyNote, Text: "a note"}},
	}
}

// The estimate is the prompt's runes / 4 rounded up, and each section's tokens
// are its own rendered text's (heading, entries and the blank line after each
// entry) the same way, so they add up to the prompt; a budget of exactly the
// prompt's tokens keeps every entry, and one token less leaves out the daily
// note, the last in priority, alone.
func TestRenderEstimatesExactly(t *testing.T) {
	pack := exactPack()
	render(&pack, 100000, noShares)
	if pack.TokenEstimate != tokensOf(pack.Prompt) {
		t.Fatalf("estimate %d, the prompt's %d runes are %d tokens", pack.TokenEstimate, utf8.RuneCountInString(pack.Prompt), tokensOf(pack.Prompt))
	}
	// The prompt is the sections, each followed by a blank line, less the last
	// newline.
	sections := strings.Split(strings.TrimSuffix(pack.Prompt, "\n"), "\n\n## ")
	if len(sections) != len(pack.Sections) {
		t.Fatalf("%d sections in the prompt, %d listed: %+v\n%s", len(sections), len(pack.Sections), pack.Sections, pack.Prompt)
	}
	runes := 0
	for i, s := range pack.Sections {
		text := sections[i]
		if i > 0 {
			text = "## " + text
		}
		text += "\n\n"
		runes += utf8.RuneCountInString(text)
		if s.Tokens != tokensOf(text) || s.Entries != 1+btoi(s.Name == "recent_events") || s.Dropped != 0 {
			t.Errorf("section %+v; its text is %d tokens, %d entries:\n%s", s, tokensOf(text), 1+btoi(s.Name == "recent_events"), text)
		}
	}
	if runes != utf8.RuneCountInString(pack.Prompt)+1 {
		t.Fatalf("sections of %d runes for a prompt of %d", runes, utf8.RuneCountInString(pack.Prompt))
	}

	// Pad the summary so that the whole takes a whole number of tokens with the
	// trimmed newline: then the budget is met exactly.
	pad := (4 - runes%4) % 4
	full := exactPack()
	full.SessionSummary += strings.Repeat("s", pad)
	budget := (runes + pad) / 4
	render(&full, budget, noShares)
	if len(full.DailyNotes) != 1 || len(full.RecentEvents) != 2 || full.SessionSummary == "" || full.TokenEstimate > budget {
		t.Fatalf("within exactly its %d tokens: notes %v, messages %v, summary %q, estimate %d; want everything kept", budget, itemIDs(full.DailyNotes), messageIDs(full.RecentEvents), full.SessionSummary, full.TokenEstimate)
	}
	short := exactPack()
	short.SessionSummary += strings.Repeat("s", pad)
	render(&short, budget-1, noShares)
	if len(short.DailyNotes) != 0 || len(short.RecentEvents) != 2 || short.SessionSummary == "" {
		t.Fatalf("within %d tokens: notes %v, messages %v, summary %q; want the daily note alone left out", budget-1, itemIDs(short.DailyNotes), messageIDs(short.RecentEvents), short.SessionSummary)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
