package records

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
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

// Issue 28: an episode is shown as its statement, with the messages said before
// it apart, as its context; its text holds both (for ranking). A text that no
// longer holds the context as one block (a model's rewrite) is shown whole.
func TestPropertySplitContextShowsTheStatementApart(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		words := rapid.SampledFrom([]string{"Remember:", "teal", "Ann", "\n", "  ", "report", "user:", "…"})
		sentence := func(label string) string {
			return strings.Join(rapid.SliceOfN(words, 1, 6).Draw(t, label), " ")
		}
		obs := Observation{Role: "user", Text: sentence("text"), EventID: "e9", Who: rapid.SampledFrom([]string{"", "user", "Ann"}).Draw(t, "who")}
		for i := range rapid.IntRange(0, 3).Draw(t, "before") {
			obs.Before = append(obs.Before, Utterance{Role: rapid.SampledFrom([]string{"user", "assistant"}).Draw(t, "role"),
				Text: sentence("earlier"), EventID: "e" + string(rune('1'+i))})
		}
		ep := Episode{Write: true, Thing: sentence("thing"), Who: "user", Time: time.Unix(0, 0)}
		rec := EpisodeRecord("t", "u", obs, ep)
		statement, context := SplitContext(rec)
		if want := EpisodeStatement(obs, ep); statement != want {
			t.Fatalf("shown as %q, want the statement %q (text %q)", statement, want, rec.Text)
		}
		if want := contextLines(obs); !slices.Equal(context, want) || (len(want) > 0 && strings.Join(want, "\n")+"\n"+statement != rec.Text) {
			t.Fatalf("context %q, want %q apart from the statement of text %q", context, want, rec.Text)
		}
		rec.Text = "a model's rewrite: " + statement
		if s, c := SplitContext(rec); s != rec.Text || c != nil {
			t.Fatalf("a rewritten text is shown as %q with context %q, want it whole", s, c)
		}
		rec.MemoryType = vectorstore.Semantic
		rec.Text = strings.Join(context, "\n") + "\n" + statement
		if s, c := SplitContext(rec); s != rec.Text || c != nil {
			t.Fatalf("a fact is shown as %q with context %q, want its text", s, c)
		}
	})
}

// metaValue draws what decoded meta holds (json.Number, strings, nested objects
// and lists) and what it may hold when built in Go (other number types, invalid
// UTF-8, numbers JSON rejects or cannot represent).
func metaValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 9
		if depth == 0 {
			kinds = 7
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "bool")
		case 2:
			return rapid.String().Draw(t, "string")
		case 3:
			return rapid.SampledFrom([]string{"D1:3", "bad \xff utf8", ""}).Draw(t, "fixed string")
		case 4:
			return json.Number(rapid.SampledFrom([]string{"1", "-0", "1.50", "12345678901234567890", "1e400", "0x10", "Inf", "", "1_0"}).Draw(t, "number"))
		case 5:
			return rapid.SampledFrom([]any{2.5, math.Inf(1), math.NaN(), 7, []string{"a"}}).Draw(t, "go value")
		case 6:
			return rapid.Float64().Draw(t, "float")
		case 7:
			return rapid.MapOf(rapid.String(), metaValue(depth-1)).Draw(t, "object")
		default:
			return rapid.SliceOf(metaValue(depth-1)).Draw(t, "list")
		}
	})
}

// PlainMeta converts without a JSON round trip where it can; the result must be
// exactly the round trip's, and meta itself where the round trip fails.
func TestPropertyPlainMetaIsTheJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		meta := rapid.MapOf(rapid.String(), metaValue(2)).Draw(t, "meta")
		want := meta
		if data, err := json.Marshal(meta); err == nil {
			var out map[string]any
			if json.Unmarshal(data, &out) == nil {
				want = out
			}
		}
		got := PlainMeta(meta)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("PlainMeta(%#v) = %#v, want %#v", meta, got, want)
		}
	})
	if PlainMeta(nil) != nil {
		t.Fatal("PlainMeta(nil) is not nil")
	}
}
