package extract_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/extract"
)

// fragments mix the triggers of every rule with near misses and noise, so that
// generated conversations exercise the rules' edges rather than plain text.
var fragments = []string{
	"I prefer", "line charts", "please always", "don't use", "it", "that", "Remember:",
	"remember that", "note that I", "don't forget", "sales.csv", "report.xlsx", "the file",
	"my sales files", "has columns", "columns:", "date, product, qty", "a, b and c", "(int)",
	"is numeric", "about 5000 rows", "10k rows", "5,000 records", "sheets Jan, Feb", "a sheet called",
	"Traceback (most recent call last):", "KeyError: 'Date'", "#VALUE!", "Error:", "not found",
	"failed with", "fixed it by", "the fix was", "that worked", "thanks, it works", "didn't work",
	"still", "Use df['date'].", "```", "?", "!", ".", ",", ":", ";", "\n", "-", "hello", "thanks",
	"YYYY-MM-DD", "keep answers short", "shape: (10, 2)", "", " ", "the", "with", "and",
	// Chinese and German
	"销售表", "库存文件", "的列：", "字段：", "日期、金额", "是整数", "工作表：", "大约 8000 行", "万", "前 10 行",
	"以后", "我习惯", "一律", "格式", "报错", "可以了", "还是不行", "。", "，", "？",
	"die Datei", "Lagerdatei", "hat die Spalten", "Datum, Filiale und Betrag", "die Spalte menge ist eine Ganzzahl",
	"Blätter", "etwa 9.000 Zeilen", "Ich bevorzuge", "immer", "Diagramme", "Fehler", "#WERT!",
	"das hat funktioniert", "funktioniert nicht", "Jetzt klappt es",
}

func genMessage(t *rapid.T) extract.Message {
	role := rapid.SampledFrom([]string{"user", "assistant", "tool", "system", "Alice", ""}).Draw(t, "role")
	parts := rapid.SliceOfN(rapid.OneOf(
		rapid.SampledFrom(fragments),
		rapid.String(),
	), 0, 12).Draw(t, "parts")
	sep := rapid.SampledFrom([]string{" ", ". ", "\n", ", ", ""}).Draw(t, "sep")
	return extract.Message{Role: role, Text: strings.Join(parts, sep)}
}

func TestRulesEntriesAreValidNonEmptyUniqueAndDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := rapid.SliceOfN(rapid.Custom(genMessage), 0, 12).Draw(t, "conversation")
		r := extract.NewRules(nil)

		first, err := r.Extract(context.Background(), c)
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		seen := map[string]bool{}
		for _, e := range first {
			if strings.TrimSpace(e.Content) == "" {
				t.Fatalf("entry with empty content: %+v", e)
			}
			if !extract.ValidCategory(e.Category) {
				t.Fatalf("entry with invalid category: %+v", e)
			}
			key := strings.ToLower(e.Content)
			if seen[key] {
				t.Fatalf("duplicate content %q in %+v", e.Content, first)
			}
			seen[key] = true
		}
		if !extract.ShouldExtract(c) && len(first) != 0 {
			t.Fatalf("entries %+v from a conversation ShouldExtract rejects", first)
		}

		second, err := extract.NewRules(nil).Extract(context.Background(), c)
		if err != nil {
			t.Fatalf("second Extract: %v", err)
		}
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("not deterministic:\n%+v\n%+v", first, second)
		}
	})
}
