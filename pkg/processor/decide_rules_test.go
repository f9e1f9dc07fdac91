package processor

import (
	"context"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/textnorm"
)

// decisionTable is the labelled corpus of SPEC C3: the SPEC examples plus the
// kinds of message each rule exists for.
var decisionTable = []struct {
	role, text string
	write      bool
}{
	// Greetings and chit-chat.
	{"user", "hi!", false},
	{"user", "thanks", false},
	{"user", "ok", false},
	{"user", "lol", false},
	{"user", "good morning", false},
	{"user", "Hi! How are you doing?", false},
	{"user", "Thanks, I really appreciate it!", false},
	{"user", "I'm good, thanks", false},
	{"user", "haha that makes sense", false},
	// Single tokens and fragments.
	{"user", "Berlin", false},
	{"user", "the weather", false},
	{"user", "I agree", false},
	{"user", "I love it", false},
	{"user", "Remember this", false},
	// Impersonal knowledge questions and requests.
	{"user", "What is the capital of France?", false},
	{"user", "How do I sort a list in Python?", false},
	{"user", "How do I convert my xlsx file to csv?", false},
	{"user", "Can you explain how photosynthesis works?", false},
	{"user", "Write a poem about the autumn sea", false},
	{"user", "I want you to summarise this article for me", false},
	{"user", "Please help me fix this stack trace", false},
	{"user", "Remember when we talked about quantum physics?", false},
	// Explicit remember requests with personal information.
	{"user", "Remember, I'm a student at Peking University", true},
	{"user", "Remember: my sales files have columns date, product, qty.", true},
	{"user", "Please don't forget that my daughter is allergic to peanuts", true},
	{"user", "Can you remember that I prefer metric units?", true},
	{"user", "I'm vegetarian, please remember that.", true},
	{"user", "Keep in mind: the staging database is called orders_v2", true},
	// First-person statements of facts, events, plans and preferences.
	{"user", "I moved to Berlin last year", true},
	{"user", "my sister's name is Ana", true},
	{"user", "we went hiking on Saturday", true},
	{"user", "I like hiking", true},
	{"user", "I prefer CSV exports over Excel files", true},
	{"user", "I'm planning to run a marathon next spring", true},
	{"user", "Hi! I just adopted a puppy named Max.", true},
	{"user", "I'm moving to Lisbon in May, what should I pack?", true},
	{"Caroline", "I went to an LGBTQ support group yesterday and it was powerful", true},
	// Assistant, tool and system messages.
	{"assistant", "You're welcome!", false},
	{"assistant", "You can use pandas.read_csv to load the file.", false},
	{"assistant", "The capital of France is Paris.", false},
	{"assistant", "Your sales files have columns date, product and qty.", true},
	{"tool", "You live in Berlin according to your profile settings.", true},
	{"system", "Remember, I'm the system prompt with personal instructions.", false},
	{"user", "   ", false},
}

func TestRuleDeciderLabelledTable(t *testing.T) {
	d := NewRuleDecider()
	ts := time.Date(2026, 11, 2, 10, 4, 0, 0, time.UTC)
	for _, tc := range decisionTable {
		obs := records.Observation{Role: tc.role, Text: tc.text, TS: ts, ChatID: "c1"}
		if tc.role != "user" && tc.role != "assistant" && tc.role != "tool" && tc.role != "system" {
			obs.Role, obs.Who = "speaker", tc.role
		}
		ep, err := d.Decide(context.Background(), obs)
		if err != nil {
			t.Fatalf("Decide(%q): %v", tc.text, err)
		}
		if ep.Write != tc.write {
			t.Errorf("Decide(%s %q).Write = %v (reason %q), want %v", tc.role, tc.text, ep.Write, ep.Reason, tc.write)
		}
		if ep.Reason == "" {
			t.Errorf("Decide(%q) gave no reason", tc.text)
		}
	}
}

func TestRuleDeciderSpecExample(t *testing.T) {
	ts := time.Date(2026, 11, 2, 10, 4, 0, 0, time.UTC)
	ep, err := NewRuleDecider().Decide(context.Background(),
		records.Observation{Role: "user", Text: "Remember, I'm a student at Peking University", TS: ts, ChatID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	want := records.Episode{
		Write: true, Who: "user", Time: ts, Reason: ReasonRemember,
		Thing:   "I'm a student at Peking University.",
		Context: "explicit remember request by user in chat c1",
	}
	if ep != want {
		t.Fatalf("got %+v\nwant %+v", ep, want)
	}
}

func TestRuleDeciderSpeaker(t *testing.T) {
	d := NewRuleDecider()
	for _, tc := range []struct{ role, who, want string }{
		{"user", "", "user"},
		{"user", "Caroline", "Caroline"}, // a named speaker keeps its name (two people in one chat)
		{"speaker", "Melanie", "Melanie"},
		{"assistant", "", "assistant"},
		{"", "", "user"},
	} {
		ep, _ := d.Decide(context.Background(), records.Observation{Role: tc.role, Who: tc.who, Text: "I moved to Berlin last year"})
		if ep.Who != tc.want {
			t.Errorf("role %q who %q: speaker %q, want %q", tc.role, tc.who, ep.Who, tc.want)
		}
	}
}

// sentenceGen mixes the table's sentences with random word salad, so properties
// see both the rules' cases and input they were not written for.
func sentenceGen() *rapid.Generator[string] {
	vocab := []string{"I", "my", "we", "remember", "hi", "thanks", "Berlin", "sister", "moved", "like",
		"what", "is", "the", "?", "!", ",", ".", "please", "you", "your", "don't", "forget", "live", "ok", "ünï", "’"}
	table := make([]string, len(decisionTable))
	for i, tc := range decisionTable {
		table[i] = tc.text
	}
	return rapid.OneOf(
		rapid.SampledFrom(table),
		rapid.Custom(func(t *rapid.T) string {
			return strings.Join(rapid.SliceOfN(rapid.SampledFrom(vocab), 0, 12).Draw(t, "words"), " ")
		}),
		rapid.String(),
	)
}

func TestRuleDecisionIsDeterministicAndWritesAreComplete(t *testing.T) {
	d := NewRuleDecider()
	rapid.Check(t, func(t *rapid.T) {
		obs := records.Observation{
			Role:   rapid.SampledFrom([]string{"user", "assistant", "tool", "system", "speaker", ""}).Draw(t, "role"),
			Who:    rapid.SampledFrom([]string{"", "Caroline"}).Draw(t, "who"),
			Text:   sentenceGen().Draw(t, "text"),
			TS:     time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "ts"), 0).UTC(),
			ChatID: rapid.StringMatching(`[a-z0-9]{0,6}`).Draw(t, "chat"),
		}
		first, err := d.Decide(context.Background(), obs)
		if err != nil {
			t.Fatal(err)
		}
		second, _ := d.Decide(context.Background(), obs)
		if first != second {
			t.Fatalf("two decisions differ:\n%+v\n%+v", first, second)
		}
		if !first.Write {
			return
		}
		if strings.TrimSpace(first.Who) == "" || strings.TrimSpace(first.Thing) == "" || first.Context == "" {
			t.Fatalf("write with empty who/thing/context: %+v", first)
		}
		if !first.Time.Equal(obs.TS) {
			t.Fatalf("time %v, want the observation's %v", first.Time, obs.TS)
		}
	})
}

// The keyword filter before the remember expressions never hides a match.
func TestPropertyRememberFilterKeepsEveryMatch(t *testing.T) {
	piece := rapid.SampledFrom([]string{"Remember", "REMEMBER", "don't forget", "Do Not Forget", "keep  in\tMIND", "make a Note",
		"take note", "note down", "NOTE", "please", "can you", "that", "this", ":", ",", " ", "?", "my files", "ſ", "K", "’"})
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.OneOf(piece, rapid.String())).Draw(t, "parts")
		text := textnorm.FoldQuotes(strings.Join(parts, " "))
		if (rememberPrefix.MatchString(text) || rememberSuffix.MatchString(text)) && !mentionsRemembering(text) {
			t.Fatalf("%q matches a remember expression but the filter rejects it", text)
		}
	})
}
