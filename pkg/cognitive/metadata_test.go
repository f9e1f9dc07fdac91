package cognitive

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A named speaker's memory keeps who said it and the whole utterance; an agent's
// user (no name, or a name equal to the role) keeps the decider's statement.
func TestEpisodeTextNamesTheSpeaker(t *testing.T) {
	ep := Episode{Write: true, Thing: "went hiking", Who: "Melanie", Time: time.Unix(0, 0)}
	for _, tc := range []struct {
		obs  Observation
		want string
	}{
		{Observation{Role: "user", Who: "Melanie", Text: " We went hiking on Saturday! "}, "Melanie: We went hiking on Saturday!"},
		{Observation{Role: "user", Who: "user", Text: "We went hiking"}, "went hiking"},
		{Observation{Role: "user", Text: "We went hiking"}, "went hiking"},
	} {
		if got := EpisodeRecord("t", "u", tc.obs, ep).Text; got != tc.want {
			t.Errorf("%+v: text %q, want %q", tc.obs, got, tc.want)
		}
	}
}

// An episode keeps the messages said before it as its context: its text is the
// exchange, its provenance every message of it (oldest first), and its statement,
// which is embedded, the utterance alone.
func TestEpisodeRecordKeepsTheExchange(t *testing.T) {
	obs := Observation{
		Role: "user", Who: "Caroline", Text: "I went to the support group yesterday.", EventID: "e3",
		Meta: map[string]any{"dia_id": "D1:3"},
		Before: []Utterance{
			{Role: "user", Who: "Melanie", Text: "What did you do this week?", EventID: "e1", Meta: map[string]any{"dia_id": "D1:1"}},
			{Role: "user", Who: "Melanie", Text: "  ", EventID: "e2"},
			{Role: "assistant", Text: "Tell me more.", EventID: "e2b"},
		},
	}
	ep := Episode{Write: true, Thing: "went to the support group", Who: "Caroline", Time: time.Unix(0, 0)}
	rec := EpisodeRecord("t", "u", obs, ep)
	wantText := "Melanie: What did you do this week?\nassistant: Tell me more.\nCaroline: I went to the support group yesterday."
	if rec.Text != wantText {
		t.Errorf("text %q, want %q", rec.Text, wantText)
	}
	if got, want := EpisodeStatement(obs, ep), "Caroline: I went to the support group yesterday."; got != want {
		t.Errorf("statement %q, want %q", got, want)
	}
	if got := StringList(rec.Metadata[MetaSourceEventIDs]); !slices.Equal(got, []string{"e1", "e2b", "e3"}) {
		t.Errorf("source_event_ids %q, want [e1 e2b e3]", got)
	}
	metas, _ := rec.Metadata[MetaSourceMeta].([]any)
	if len(metas) != 3 || metas[0].(map[string]any)["dia_id"] != "D1:1" || metas[2].(map[string]any)["dia_id"] != "D1:3" {
		t.Errorf("source_meta %v, want the dia ids of e1, e2b (none) and e3", metas)
	}
	alone := obs
	alone.Before = nil
	if again := EpisodeRecord("t", "u", alone, ep); again.ID != rec.ID {
		t.Errorf("the id depends on the context: %s vs %s", again.ID, rec.ID)
	}
}

// A long context message is shortened in the episode's text; the statement is not.
func TestEpisodeContextMessagesAreBounded(t *testing.T) {
	long := strings.Repeat("rows of data ", 200)
	obs := Observation{Role: "user", Who: "Ann", Text: "Plot the rows by region. " + long, EventID: "e2",
		Before: []Utterance{{Role: "tool", Text: long, EventID: "e1"}}}
	rec := EpisodeRecord("t", "u", obs, Episode{Write: true, Thing: "plot the rows", Who: "Ann", Time: time.Unix(0, 0)})
	first, last, _ := strings.Cut(rec.Text, "\n")
	if len(first) > len("tool: ")+maxContextBytes+len("…") || !strings.HasSuffix(first, "…") {
		t.Errorf("context line of %d bytes, want at most %d, shortened with an ellipsis", len(first), maxContextBytes)
	}
	if last != EpisodeStatement(obs, Episode{Thing: "plot the rows"}) {
		t.Errorf("statement line %q was changed", last)
	}
}
