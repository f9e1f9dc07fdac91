package processor

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/textnorm"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func episode(id, who, chat, text string, ts time.Time) vectorstore.Record {
	return vectorstore.Record{ID: id, Who: who, ChatID: chat, Text: text, TS: ts, MemoryType: "episodic"}
}

func TestRuleSemanticWriterFacts(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	episodes := []vectorstore.Record{
		episode("e1", "user", "c1", "I'm a student at Peking University.", t0),
		episode("e2", "user", "c2", "I live in Berlin with my wife.", t0.Add(time.Hour)),
		episode("e3", "user", "c2", "My sister's name is Ana. We went hiking on Saturday.", t0.Add(2*time.Hour)),
		episode("e4", "user", "c3", "I like spicy food", t0.Add(3*time.Hour)),
		episode("e5", "Caroline", "c4", "I'm from Sweden", t0.Add(4*time.Hour)),
		episode("e6", "assistant", "c5", "Your sales files have columns date, product and qty.", t0.Add(5*time.Hour)),
		episode("e7", "user", "c6", "My sister is visiting next week.", t0.Add(6*time.Hour)),
		episode("e8", "user", "c6", "What is my favourite colour?", t0.Add(7*time.Hour)),
		// Restated later in another chat: the first statement wins.
		episode("e9", "user", "c9", "i'm a student at peking university", t0.Add(8*time.Hour)),
	}
	known := []vectorstore.Record{{ID: "s1", MemoryType: "semantic", Text: "User likes spicy food."}}

	facts, err := NewRuleSemanticWriter().Facts(context.Background(), episodes, known)
	if err != nil {
		t.Fatal(err)
	}
	want := []records.Fact{
		{Fact: "User is a student at Peking University.", SourceChatID: "c1", FirstSeen: t0},
		{Fact: "User lives in Berlin with their wife.", SourceChatID: "c2", FirstSeen: t0.Add(time.Hour)},
		{Fact: "User's sister's name is Ana.", SourceChatID: "c2", FirstSeen: t0.Add(2 * time.Hour)},
		{Fact: "Caroline is from Sweden.", SourceChatID: "c4", FirstSeen: t0.Add(4 * time.Hour)},
		{Fact: "User's sales files have columns date, product and qty.", SourceChatID: "c5", FirstSeen: t0.Add(5 * time.Hour)},
	}
	if !slices.Equal(facts, want) {
		t.Fatalf("facts:\n%v\nwant:\n%v", facts, want)
	}
}

func TestRuleSemanticWriterNeverDuplicates(t *testing.T) {
	statements := []string{"I'm a student at Peking University", "I live in Berlin", "my name is Ana",
		"I love jazz", "I have two cats", "I prefer tea", "I work at Acme as an engineer", "we went hiking",
		"I'm from Sweden", "My dog is called Rex"}
	rapid.Check(t, func(t *rapid.T) {
		var episodes, known []vectorstore.Record
		n := rapid.IntRange(0, 12).Draw(t, "n")
		for i := range n {
			text := rapid.SampledFrom(statements).Draw(t, "statement")
			if rapid.Bool().Draw(t, "shout") {
				text = strings.ToUpper(text) + "!"
			}
			episodes = append(episodes, episode(string(rune('a'+i)), "user", "c", text, time.Unix(int64(i), 0)))
		}
		for _, f := range rapid.SliceOfN(rapid.SampledFrom([]string{"User lives in Berlin.", "user loves jazz", "User has two cats"}), 0, 3).Draw(t, "known") {
			known = append(known, vectorstore.Record{Text: f})
		}
		facts, err := NewRuleSemanticWriter().Facts(context.Background(), episodes, known)
		if err != nil {
			t.Fatal(err)
		}
		seen := knownFacts(known)
		for _, f := range facts {
			n := textnorm.Normalize(f.Fact)
			if seen[n] {
				t.Fatalf("fact %q duplicates a known or earlier fact (known %v, facts %v)", f.Fact, known, facts)
			}
			seen[n] = true
		}
	})
}

func TestRuleMergerKeepsEveryDistinctSentenceOnce(t *testing.T) {
	a := vectorstore.Record{Text: "I moved to Berlin last year."}
	b := vectorstore.Record{Text: "I moved to Berlin last year. My flat is in Kreuzberg."}
	merged, err := NewRuleMerger().Merge(context.Background(), a, b)
	got := merged.Text
	if err != nil {
		t.Fatal(err)
	}
	if want := "I moved to Berlin last year. My flat is in Kreuzberg."; got != want {
		t.Fatalf("merge = %q, want %q", got, want)
	}
	merged, _ = NewRuleMerger().Merge(context.Background(), vectorstore.Record{Text: "We went hiking on Saturday."},
		vectorstore.Record{Text: "Saturday we hiked up the Brocken with Ana."})
	got = merged.Text
	if !strings.Contains(got, "hiking on Saturday") || !strings.Contains(got, "Brocken with Ana") {
		t.Fatalf("merge %q lost information", got)
	}
}

func TestRuleSeparatorMakesDistinctTextsAndIsStable(t *testing.T) {
	sep := NewRuleSeparator()
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.SampledFrom([]string{"I went hiking.", "I went hiking with Ana.", ""}).Draw(t, "text")
		a := episode("a"+rapid.StringMatching(`[0-9]{0,3}`).Draw(t, "ida"), "user", rapid.SampledFrom([]string{"c1", "c2", ""}).Draw(t, "ca"), text,
			time.Unix(rapid.Int64Range(0, 3600).Draw(t, "ta"), 0))
		b := episode("b"+rapid.StringMatching(`[0-9]{0,3}`).Draw(t, "idb"), "user", rapid.SampledFrom([]string{"c1", "c2", ""}).Draw(t, "cb"), text,
			time.Unix(rapid.Int64Range(0, 3600).Draw(t, "tb"), 0))
		ra, rb, err := sep.Separate(context.Background(), a, b)
		ta, tb := ra.Text, rb.Text
		if err != nil {
			t.Fatal(err)
		}
		if ta == tb {
			t.Fatalf("separated texts are equal: %q", ta)
		}
		a.Text, b.Text = ta, tb
		ra2, rb2, err := sep.Separate(context.Background(), a, b)
		ta2, tb2 := ra2.Text, rb2.Text
		if err != nil || ta2 != ta || tb2 != tb {
			t.Fatalf("separating again changed %q/%q to %q/%q (err %v)", ta, tb, ta2, tb2, err)
		}
	})
	if _, _, err := sep.Separate(context.Background(), episode("x", "user", "c", "t", time.Unix(0, 0)), episode("x", "user", "c", "t", time.Unix(0, 0))); err == nil {
		t.Fatal("separating a memory from itself gave no error")
	}
}

// Issue 28: the offline reconsolidator never writes the context it was recalled
// for, or anything else, into the text.
func TestRuleReconsolidatorKeepsTheText(t *testing.T) {
	r := NewRuleReconsolidator()
	rapid.Check(t, func(t *rapid.T) {
		m := vectorstore.Record{Text: rapid.String().Draw(t, "text")}
		got, err := r.Reconsolidate(context.Background(), m, rapid.String().Draw(t, "new context"))
		if err != nil || got != (Rewrite{Text: m.Text}) {
			t.Fatalf("reconsolidated %q to %q (%v), want it unchanged", m.Text, got, err)
		}
	})
}

// firstWord reads only the first word of a text, as words would tokenize it.
func TestPropertyFirstWordIsWordsFirst(t *testing.T) {
	special := rapid.SampledFrom([]string{"’", "‘", "ʼ", "'", "İ", "K", "\xff", " ", ",", "é", "e\u0301", "Ⅻ", "٣", "?"})
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.OneOf(rapid.String(), special)).Draw(t, "parts")
		s := strings.Join(parts, "")
		want := ""
		if ws := words(s); len(ws) > 0 {
			want = ws[0]
		}
		if got := firstWord(s); got != want {
			t.Fatalf("firstWord(%q) = %q, words gives %q", s, got, want)
		}
	})
}
