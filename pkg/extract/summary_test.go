package extract

import (
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func TestSummarizeRequestKeyPointsOutcome(t *testing.T) {
	conv := []Message{
		{Role: RoleSystem, Text: "You are a spreadsheet assistant."},
		{Role: RoleUser, Text: "Can you build a sales chart from sales.xlsx?"},
		{Role: RoleAssistant, Text: "Sure, which columns does it have?"},
		{Role: RoleUser, Text: "My sales files have columns date, product and qty. I prefer bar charts. The weather is nice."},
		{Role: RoleUser, Text: "Let's use the March sheet instead."},
		{Role: RoleUser, Text: "I prefer bar charts."},
		{Role: RoleAssistant, Text: "Done: the bar chart of March sales is in chart.png."},
	}
	want := "Request: Can you build a sales chart from sales.xlsx?\n" +
		"Key points:\n" +
		"- My sales files have columns date, product and qty.\n" +
		"- I prefer bar charts.\n" +
		"- Let's use the March sheet instead.\n" +
		"Outcome: Done: the bar chart of March sales is in chart.png."
	if got := Summarize(conv, 0); got != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", got, want)
	}
	if got := Summarize(conv, 0); got != Summarize(conv, 0) {
		t.Fatal("not deterministic")
	}
	if got := Summarize(nil, 100); got != "" {
		t.Fatalf("empty conversation gave %q", got)
	}
	short := Summarize(conv, 120)
	if !strings.HasPrefix(short, "Request: ") || !strings.Contains(short, "Outcome: ") || strings.Contains(short, "March sheet") {
		t.Fatalf("bounded summary keeps request and outcome and drops what does not fit:\n%s", short)
	}
}

func TestSummarizeNeverExceedsMaxChars(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		roles := []string{RoleUser, RoleAssistant, RoleTool, RoleSystem, "bob"}
		n := rapid.IntRange(0, 12).Draw(t, "messages")
		conv := make([]Message, n)
		for i := range conv {
			conv[i] = Message{
				Role: rapid.SampledFrom(roles).Draw(t, "role"),
				Text: rapid.SampledFrom([]string{"I prefer bar charts.", "Remember: my files have columns a, b.", "ok", "Let's decide later.", "héllo wörld ✓ "}).Draw(t, "text") +
					rapid.String().Draw(t, "noise"),
			}
		}
		max := rapid.IntRange(1, 400).Draw(t, "max")
		got := Summarize(conv, max)
		if utf8.RuneCountInString(got) > max {
			t.Fatalf("%d runes, max %d: %q", utf8.RuneCountInString(got), max, got)
		}
		if got != Summarize(conv, max) {
			t.Fatal("not deterministic")
		}
	})
}
