package retrieve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/events"
)

// encoded is v's JSON as fit writes it.
func encoded(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	if err := encode(&buf, v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// fit sends a reply whole when it is exactly the limit, and otherwise the most
// results whose reply is within the limit (exactly at it included), down to
// none; a reply that does not fit even empty, or has no units to drop, is
// ErrReplyTooLarge naming both sizes.
func TestFitKeepsTheMostUnitsThatFit(t *testing.T) {
	var results []events.SearchResult
	for i := range 4 {
		results = append(results, events.SearchResult{ID: fmt.Sprintf("r%d", i), Text: strings.Repeat("x", 50+10*i)})
	}
	reply := events.SearchReply{Results: results}
	whole := encoded(t, reply)
	// The limit is on the JSON alone: no newline after it (json.Encoder's).
	if want, err := json.Marshal(reply); err != nil || whole != string(want) {
		t.Fatalf("encode: %q (%v), want %q", whole, err, want)
	}
	keep := func(n int) string { return encoded(t, searchCut(reply).keep(n)) }
	for _, tc := range []struct {
		name  string
		limit int
		want  string // "" for ErrReplyTooLarge
	}{
		{"the whole reply, exactly", len(whole), whole},
		{"one result too many", len(whole) - 1, keep(3)},
		{"three results, exactly", len(keep(3)), keep(3)},
		{"one byte short of three", len(keep(3)) - 1, keep(2)},
		{"none, exactly", len(keep(0)), keep(0)},
		{"not even none", len(keep(0)) - 1, ""},
	} {
		var buf bytes.Buffer
		err := fit(&buf, events.EndpointSearch, reply, tc.limit)
		if tc.want == "" {
			wantMsg := fmt.Sprintf("is %d bytes, over the connection's max payload of %d bytes", len(whole), tc.limit)
			if !errors.Is(err, ErrReplyTooLarge) || !strings.Contains(err.Error(), wantMsg) {
				t.Errorf("%s: %v; want ErrReplyTooLarge saying %q", tc.name, err, wantMsg)
			}
			continue
		}
		if err != nil || buf.String() != tc.want {
			t.Errorf("%s (limit %d): %v\n%s\nwant\n%s", tc.name, tc.limit, err, buf.String(), tc.want)
		}
	}
	// A reply without units to drop is not cut.
	topic := events.TopicReply{Topic: "t", Content: strings.Repeat("t", 100)}
	var buf bytes.Buffer
	if err := fit(&buf, events.EndpointTopic, topic, 50); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("a topic of 100 bytes within 50: %v, want ErrReplyTooLarge", err)
	}
}

// A context pack with an entry in every list counts each (the core memory by
// lines) as a unit; cut by one it loses the oldest recent turn alone, by more
// the lists in render's reverse priority, down to the core memory's first line;
// what is kept stays in the prompt.
func TestPackCutCountsEveryListAndKeepsByPriority(t *testing.T) {
	item := func(key string) events.MemoryItem {
		return events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemFact, Key: key, Content: "content of " + key, Confidence: 1}
	}
	pi := func(id string, kind events.PackItemKind) events.PackItem {
		return events.PackItem{ID: id, Kind: kind, Text: "text of " + id}
	}
	pack := events.ContextPack{
		Core:          &events.PackItem{Kind: events.PackKindCore, Text: "# Memory\nfirst core line\n"},
		Persona:       []events.MemoryItem{item("persona")},
		UserProfile:   []events.MemoryItem{item("profile")},
		SessionItems:  []events.MemoryItem{item("session")},
		AgentItems:    []events.PackItem{pi("agent", events.PackKindSemantic)},
		TenantItems:   []events.PackItem{pi("tenant", events.PackKindSemantic)},
		SemanticItems: []events.PackItem{pi("semantic", events.PackKindSemantic)},
		Topics:        []events.PackItem{pi("topic", events.PackKindTopic)},
		EpisodicItems: []events.PackItem{pi("episode", events.PackKindEpisodic)},
		RecentEvents:  []events.EventRecord{message(0), message(1)},
		Chunks:        []events.PackItem{pi("chunk", events.PackKindChunk)},
		DailyNotes:    []events.PackItem{pi("note", events.PackKindDailyNote)},
		RecentTurns:   []events.TurnRecord{{TurnID: "t0"}, {TurnID: "t1"}},
	}
	render(&pack, 100000, noShares)
	// kept lists what a pack holds, one list a line.
	kept := func(p events.ContextPack) string {
		var turns []string
		for _, tr := range p.RecentTurns {
			turns = append(turns, tr.TurnID)
		}
		core := ""
		if p.Core != nil {
			core = p.Core.Text
		}
		keys := func(items []events.MemoryItem) []string {
			var out []string
			for _, it := range items {
				out = append(out, it.Key)
			}
			return out
		}
		return fmt.Sprintf("core %q\npersona %v profile %v session %v agent %v tenant %v semantic %v\ntopics %v episodes %v messages %v chunks %v notes %v turns %v",
			core, keys(p.Persona), keys(p.UserProfile), keys(p.SessionItems), itemIDs(p.AgentItems), itemIDs(p.TenantItems), itemIDs(p.SemanticItems),
			itemIDs(p.Topics), itemIDs(p.EpisodicItems), messageIDs(p.RecentEvents), itemIDs(p.Chunks), itemIDs(p.DailyNotes), turns)
	}
	if n := packCut(pack).units(); n != 16 {
		t.Fatalf("units = %d, want 16: 2 core lines, 2 messages, 2 turns and one entry in each of the 10 other lists", n)
	}
	lists := func(chunks, notes, turns string) string {
		return `core "# Memory\nfirst core line\n"
persona [persona] profile [profile] session [session] agent [agent] tenant [tenant] semantic [semantic]
topics [topic] episodes [episode] messages [m0 m1] chunks ` + chunks + ` notes ` + notes + ` turns ` + turns
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{15, lists("[chunk]", "[note]", "[t1]")},
		{12, lists("[]", "[]", "[]")},
		{11, strings.Replace(lists("[]", "[]", "[]"), "[m0 m1]", "[m1]", 1)},
		{1, `core "# Memory\n"
persona [] profile [] session [] agent [] tenant [] semantic []
topics [] episodes [] messages [] chunks [] notes [] turns []`},
	} {
		cut := packCut(pack).keep(tc.n).(events.ContextPack)
		if got := kept(cut); got != tc.want || !cut.Truncated {
			t.Errorf("keep(%d):\n%s\nwant\n%s", tc.n, got, tc.want)
		}
	}
	// Rendered again within its estimate, a pack cut by one drops nothing more
	// from its prompt.
	cut := packCut(pack).keep(15).(events.ContextPack)
	for _, text := range []string{"first core line", "content of persona", "content of profile", "content of session", "text of agent", "text of tenant",
		"text of semantic", "text of topic", "text of episode", "message 0 ", "message 1 ", "text of chunk", "text of note"} {
		if !strings.Contains(cut.Prompt, text) {
			t.Errorf("keep(15): %q is not in the prompt:\n%s", text, cut.Prompt)
		}
	}
}
