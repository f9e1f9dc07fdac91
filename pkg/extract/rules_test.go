package extract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// conv builds a conversation from alternating role, text pairs.
func conv(pairs ...string) []extract.Message {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var out []extract.Message
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, extract.Message{Role: pairs[i], Text: pairs[i+1], TS: t0.Add(time.Duration(i) * time.Minute)})
	}
	return out
}

func rulesExtract(t testing.TB, c []extract.Message) []extract.Extracted {
	t.Helper()
	out, err := extract.NewRules(nil).Extract(context.Background(), c)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	return out
}

func ofCategory(entries []extract.Extracted, cat markdown.Category) []string {
	var out []string
	for _, e := range entries {
		if e.Category == cat {
			out = append(out, e.Content)
		}
	}
	return out
}

func TestShouldExtract(t *testing.T) {
	for _, tc := range []struct {
		name string
		conv []extract.Message
		want bool
	}{
		{"nil", nil, false},
		{"empty", []extract.Message{}, false},
		{"system only", conv("system", "You are excel-bot.", "system", "Be helpful."), false},
		{"blank user", conv("system", "You are excel-bot.", "user", "  \n\t "), false},
		{"user", conv("system", "You are excel-bot.", "user", "hi"), true},
		{"tool only", conv("tool", "shape: (10, 2)"), true},
		{"speaker", conv("Caroline", "I went to the support group."), true},
	} {
		if got := extract.ShouldExtract(tc.conv); got != tc.want {
			t.Errorf("%s: ShouldExtract = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRulesFilePatternMergesSession(t *testing.T) {
	got := rulesExtract(t, conv(
		"system", "You are excel-bot. Columns: x, y, z.",
		"user", "Hi! I'm uploading my sales export, sales.csv.",
		"tool", "Loaded /uploads/sales.csv\ncolumns: date, product, qty, unit_price, amount",
		"assistant", "Got it: sales.csv has columns date, product, qty, unit_price and amount, about 5000 rows.",
		"user", "Right. date is a date, qty (int), and amount is numeric. It has about 5000 rows.",
		"assistant", "Thanks. Shall I chart revenue by product?",
		"user", "Later. Also, inventory.xlsx has sheets Stock, Orders and Suppliers; the Stock sheet has columns: sku, name, on_hand (int).",
		"user", "And sales.csv columns date, product, qty, unit_price, amount: same as before.",
	))
	files := ofCategory(got, markdown.CategoryFilePattern)
	want := []string{
		"sales.csv: columns date (date), product, qty (int), unit_price, amount (numeric); about 5000 rows",
		"inventory.xlsx: columns sku, name, on_hand (int); sheets Stock, Orders, Suppliers",
	}
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Fatalf("file patterns:\n%s\nwant:\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	if len(got) != len(want) {
		t.Fatalf("unexpected other entries: %+v", got)
	}
}

func TestRulesFileFacts(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"My orders.csv file has columns: id, customer and total.", "orders.csv: columns id, customer, total"},
		{"The customers table has fields id, name, email and signup_date.", "customers table: columns id, name, email, signup_date"},
		{"I keep a file called stock.tsv with columns sku, qty.", "stock.tsv: columns sku, qty"},
		{"events.parquet: 5,000 rows", "events.parquet: 5000 rows"},
		{"log.json has roughly 10k records", "log.json: roughly 10000 rows"},
		{"budget.xlsx has a sheet called Summary and a 'Q1 2024' tab", "budget.xlsx: sheets Summary, Q1 2024"},
		{"Remember: my sales files have columns date, product, qty.", "sales files: columns date, product, qty"},
		{"The column names are a, b and c. The column code is text.", "table: columns a, b, c, code (text)"},
		{"data.csv\nshape: (4998, 5)\nRangeIndex: 4998 entries", "data.csv: 4998 rows"},
		{"the columns are called id", "table: columns id"},
	} {
		got := ofCategory(rulesExtract(t, conv("user", tc.text)), markdown.CategoryFilePattern)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.text, got, tc.want)
		}
	}
}

func TestRulesFileNonFacts(t *testing.T) {
	for _, text := range []string{
		"The columns look wrong.",
		"Add a column for tax.",
		"It is a number.",
	} {
		if got := rulesExtract(t, conv("user", text)); len(got) != 0 {
			t.Errorf("%q gave %+v, want nothing", text, got)
		}
	}
}

// A data file the user names in passing is kept by its name (issue 29), with no
// structure read into what the sentence does with it; a tool naming a file is no
// evidence that the user works with it.
func TestRulesFileNamedInPassing(t *testing.T) {
	for _, tc := range []struct{ role, text, want string }{
		{"user", "Show me the first 10 rows of sales.csv.", "sales.csv: a file the user works with, structure not stated"},
		{"user", "I deleted 3 rows from report.xlsx.", "report.xlsx: a file the user works with, structure not stated"},
		{"user", "Can you open sales.csv?", "sales.csv: a file the user works with, structure not stated"},
		{"user", "I saved the cleaned export as customers_q3.parquet last night.", "customers_q3.parquet: a file the user works with, structure not stated"},
		{"user", "Ich habe alles in Umsatz_2025-Q1.xlsx abgelegt.", "Umsatz_2025-Q1.xlsx: a file the user works with, structure not stated"},
		{"tool", "wrote /tmp/out/customers_q3.parquet", ""},
	} {
		got := ofCategory(rulesExtract(t, conv(tc.role, tc.text)), markdown.CategoryFilePattern)
		want := []string{tc.want}
		if tc.want == "" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s %q:\n got %q\nwant %q", tc.role, tc.text, got, want)
		}
	}
}

func TestRulesPreferences(t *testing.T) {
	got := rulesExtract(t, conv(
		"user", "Hi there! Can you chart my monthly revenue?",
		"assistant", "Sure, here is a bar chart. I'll always use bar charts for you.",
		"user", "Thanks. I prefer line charts over bar charts for trends.",
		"user", "Oh and, please always show dates as YYYY-MM-DD. Keep answers short.",
		"user", "Don't use pie charts. I like it! That's cool.",
		"user", "I want numbers with two decimals. Show me a pie chart just this once?",
		"user", "I like tables better than long paragraphs.",
		"assistant", "Noted.",
	))
	want := []string{
		"I prefer line charts over bar charts for trends.",
		"Please always show dates as YYYY-MM-DD.",
		"Keep answers short.",
		"Don't use pie charts.",
		"I want numbers with two decimals.",
		"I like tables better than long paragraphs.",
	}
	prefs := ofCategory(got, markdown.CategoryUserPref)
	if strings.Join(prefs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("preferences:\n%s\nwant:\n%s", strings.Join(prefs, "\n"), strings.Join(want, "\n"))
	}
	if len(got) != len(want) {
		t.Fatalf("unexpected other entries: %+v", got)
	}
}

func TestRulesErrorSolutions(t *testing.T) {
	got := rulesExtract(t, conv(
		"user", "When I run my script on sales.csv I get this:\n```\nTraceback (most recent call last):\n  File \"report.py\", line 7, in <module>\n    total = df['Date']\nKeyError: 'Date'\n```\nWhat's wrong?",
		"assistant", "The column is named in lowercase. Use df['date'] instead of df['Date'].",
		"user", "Thanks, it works now!",
		"user", "My VLOOKUP returns #N/A for half the rows.",
		"assistant", "Maybe the lookup values have trailing spaces. Wrap them in TRIM().",
		"user", "No, that didn't work, still #N/A.",
		"assistant", "Then the IDs are stored as text. Convert the ID column with VALUE().",
		"user", "Perfect, that worked.",
		"user", "Also the export failed with PermissionError: [Errno 13] on out.xlsx, but I fixed it by closing the file in Excel first.",
		"user", "And pandas says ModuleNotFoundError: No module named 'openpyxl'.",
		"assistant", "Run pip install openpyxl.",
		"user", "OK I'll try tomorrow.",
	))
	want := []string{
		"Error: KeyError: 'Date'. Fix: The column is named in lowercase. Use df['date'] instead of df['Date']",
		"Error: My VLOOKUP returns #N/A for half the rows. Fix: Then the IDs are stored as text. Convert the ID column with VALUE()",
		"Error: The export failed with PermissionError: [Errno 13] on out.xlsx. Fix: Closing the file in Excel first",
	}
	sols := ofCategory(got, markdown.CategoryErrorSolution)
	if strings.Join(sols, "\n") != strings.Join(want, "\n") {
		t.Fatalf("error solutions:\n%s\nwant:\n%s", strings.Join(sols, "\n"), strings.Join(want, "\n"))
	}
}

func TestRulesRemember(t *testing.T) {
	got := rulesExtract(t, conv(
		"user", "Please remember that my manager is Anna Berg.",
		"user", "Remember: I prefer euros with two decimal places.",
		"user", "Don't forget the quarterly report is due on Fridays.",
		"user", "Note that I work in the finance team. Note: this is odd.",
		"user", "Remember: my orders files have columns id, customer, total.",
		"user", "I don't remember the formula. Remember the file I sent?",
		"user", "Could you please remember that my fiscal year starts in April?",
	))
	want := []extract.Extracted{
		{Category: markdown.CategoryGeneral, Content: "My manager is Anna Berg."},
		{Category: markdown.CategoryUserPref, Content: "I prefer euros with two decimal places."},
		{Category: markdown.CategoryGeneral, Content: "The quarterly report is due on Fridays."},
		{Category: markdown.CategoryGeneral, Content: "I work in the finance team."},
		{Category: markdown.CategoryFilePattern, Content: "orders files: columns id, customer, total"},
		{Category: markdown.CategoryGeneral, Content: "My fiscal year starts in April"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRulesChitChatGivesNothing(t *testing.T) {
	got := rulesExtract(t, conv(
		"system", "You are a friendly assistant. Remember: always be polite. I prefer short answers.",
		"user", "Hello! How are you today?",
		"assistant", "I'm great, thanks for asking! How can I help you?",
		"user", "Nothing much, just saying hi. I like it here. That's cool.",
		"assistant", "Glad to hear it! Let me know if you need anything.",
		"user", "What's a pivot table, by the way?",
		"assistant", "A pivot table summarises data by groups. Use Insert > PivotTable.",
		"user", "Thanks, that works for me. Bye!",
	))
	if len(got) != 0 {
		t.Fatalf("chit-chat gave %+v", got)
	}
}

func TestRulesSystemOnly(t *testing.T) {
	c := conv("system", "Remember: my sales.csv has columns a, b. I prefer bar charts.")
	if extract.ShouldExtract(c) {
		t.Fatal("ShouldExtract is true for a system-only conversation")
	}
	if got := rulesExtract(t, c); len(got) != 0 {
		t.Fatalf("system-only conversation gave %+v", got)
	}
}

func TestRulesOrderOfFirstEvidenceAndDedup(t *testing.T) {
	got := rulesExtract(t, conv(
		"user", "Remember that I work in Berlin.",
		"user", "a.csv has columns x, y.",
		"user", "I prefer bar charts.",
		"user", "remember that  I work in   berlin.",
		"user", "a.csv has about 20 rows. I prefer bar charts.",
	))
	want := []extract.Extracted{
		{Category: markdown.CategoryGeneral, Content: "I work in Berlin."},
		{Category: markdown.CategoryFilePattern, Content: "a.csv: columns x, y; about 20 rows"},
		{Category: markdown.CategoryUserPref, Content: "I prefer bar charts."},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRulesHonoursCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := extract.NewRules(nil).Extract(ctx, conv("user", "I prefer bar charts.")); err == nil {
		t.Fatal("Extract on a cancelled context returned no error")
	}
}

// benchSession is a 40-message working session touching every rule.
func benchSession() []extract.Message {
	turns := []string{
		"user", "Hi! I uploaded sales.csv with columns date, product, qty, unit_price, amount.",
		"tool", "Loaded sales.csv\nshape: (5000, 5)",
		"assistant", "sales.csv has 5000 rows and 5 columns. What would you like to do?",
		"user", "Chart revenue by month. I prefer line charts, and please always show dates as YYYY-MM-DD.",
		"assistant", "Here is the line chart of monthly revenue.",
		"user", "My SUMIFS gives #VALUE! when I filter by product.",
		"assistant", "The criteria range has a different size. Make sure both ranges cover rows 2 to 5001.",
		"user", "Thanks, that worked!",
		"user", "Remember that my fiscal year starts in April.",
		"assistant", "Noted: your fiscal year starts in April.",
	}
	var out []extract.Message
	for len(out) < 40 {
		out = append(out, conv(turns...)...)
	}
	return out[:40]
}

func BenchmarkRulesExtract(b *testing.B) {
	r := extract.NewRules(nil)
	session := benchSession()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Extract(ctx, session); err != nil {
			b.Fatal(err)
		}
	}
}

// A long message that names "columns" again and again (within the text size
// limit) costs time in proportion to its length, not its square: each list is
// read up to its end only. Compare ns/op at 16 and 64 KiB.
func BenchmarkFileFactsOfALongSentence(b *testing.B) {
	for _, size := range []int{16 << 10, 64 << 10} {
		sent := strings.Repeat("the columns are date, product, qty and ", size/40)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			for b.Loop() {
				_ = extract.FileFactsIn(sent)
			}
		})
	}
}
