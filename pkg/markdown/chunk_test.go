package markdown

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/bm25"
	"pgregory.net/rapid"
)

func TestChunks(t *testing.T) {
	entry := entryAt(15, 30, "Sales files: columns date, qty.\n\nAbout 5000 rows.")
	tests := []struct {
		name string
		doc  string
		want []Chunk
	}{
		{name: "empty doc"},
		{name: "only blank lines and rules", doc: "\n\n---\n\n  \n---\n"},
		{name: "paragraphs split on blank lines", doc: "first para\nstill first\n\n\nsecond\n", want: []Chunk{
			{Text: "first para\nstill first", StartLine: 1, EndLine: 2},
			{Text: "second", StartLine: 5, EndLine: 5},
		}},
		{name: "entry is one chunk without its separator", doc: "# Memory\n\n" + entry, want: []Chunk{
			{Text: "# Memory", StartLine: 1, EndLine: 1, Heading: "Memory"},
			{Text: strings.TrimSuffix(entry, "\n\n---\n"), StartLine: 3, EndLine: 7, Heading: "[2025-01-15 10:30] general"},
		}},
		{name: "date section runs to next heading", doc: "## 2025-01-15\n\nfact one\n\nfact two\n---\n## Other\nbody\n\nmore\n", want: []Chunk{
			{Text: "## 2025-01-15\n\nfact one\n\nfact two\n---", StartLine: 1, EndLine: 6, Heading: "2025-01-15"},
			{Text: "## Other\nbody", StartLine: 7, EndLine: 8, Heading: "Other"},
			{Text: "more", StartLine: 10, EndLine: 10, Heading: "Other"},
		}},
		{name: "heading ends a paragraph", doc: "intro\n### Sub\ntext\n", want: []Chunk{
			{Text: "intro", StartLine: 1, EndLine: 1},
			{Text: "### Sub\ntext", StartLine: 2, EndLine: 3, Heading: "Sub"},
		}},
		{name: "CRLF", doc: "a\r\nb\r\n\r\nc\r\n", want: []Chunk{
			{Text: "a\r\nb", StartLine: 1, EndLine: 2},
			{Text: "c", StartLine: 4, EndLine: 4},
		}},
		{name: "malformed entry still one chunk", doc: "### [2025-02-30 10:00] general\n\nbody\n\nmore", want: []Chunk{
			{Text: "### [2025-02-30 10:00] general\n\nbody\n\nmore", StartLine: 1, EndLine: 5, Heading: "[2025-02-30 10:00] general"},
		}},
		{name: "hashtag is not a heading", doc: "#tag line\n", want: []Chunk{{Text: "#tag line", StartLine: 1, EndLine: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Chunks(tt.doc); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Chunks(%q) =\n%+v\nwant\n%+v", tt.doc, got, tt.want)
			}
		})
	}
}

func salesDoc() string {
	at := func(d int) time.Time { return time.Date(2025, 1, d, 9, 0, 0, 0, time.UTC) }
	return "# Memory\n\nThe user works in a finance team.\n\n" + FormatEntries([]Entry{
		{Time: at(1), Category: CategoryUserPref, Content: "Prefers bar charts with a dark theme and files exported as PDF."},
		{Time: at(2), Category: CategoryErrorSolution, Content: "KeyError 'amount': the column is called 'Amount' in older exports."},
		{Time: at(3), Category: CategoryFilePattern, Content: "Sales files: columns date, product, qty, unit_price, amount; about 5000 rows."},
		{Time: at(4), Category: CategoryGeneral, Content: "Quarterly reports are due on the 5th."},
	}) + "\n## 2025-01-05\n\nInventory files list sku and stock per warehouse.\n"
}

func TestSearchChunksRanksSalesEntryFirst(t *testing.T) {
	got := SearchChunks(salesDoc(), "columns of sales files", 10)
	if len(got) < 2 {
		t.Fatalf("got %d chunks, want the sales entry and other matches: %+v", len(got), got)
	}
	if !strings.Contains(got[0].Text, "Sales files: columns") {
		t.Errorf("top chunk = %q, want the sales entry", got[0].Text)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Score > got[i-1].Score || got[i].Score <= 0 {
			t.Errorf("scores not descending and positive: %v then %v", got[i-1].Score, got[i].Score)
		}
	}
}

func TestSearchChunksLimitsAndEmptyQuery(t *testing.T) {
	doc := salesDoc()
	if got := SearchChunks(doc, "files", 1); len(got) != 1 {
		t.Errorf("limit 1 gave %d chunks", len(got))
	}
	if got := SearchChunks(doc, "files", 0); got != nil {
		t.Errorf("limit 0 gave %v", got)
	}
	for _, q := range []string{"", "   ", "the of a"} {
		if got := SearchChunks(doc, q, 5); got != nil {
			t.Errorf("query %q gave %v, want nil", q, got)
		}
	}
	if got := SearchChunks(doc, "zebra", 5); len(got) != 0 {
		t.Errorf("unmatched query gave %v", got)
	}
	if got := SearchChunks("", "sales", 5); len(got) != 0 {
		t.Errorf("empty doc gave %v", got)
	}
}

func TestPropertyChunksAreSubstringsOfDoc(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.OneOf(
			rapid.SampledFrom([]string{"\n", "\r\n", "\n\n", "---\n", "## 2025-01-15\n", "# Title\n", "### Sub\n", "sales columns\n", "files\n", "#tag\n"}),
			rapid.Custom(func(t *rapid.T) string { return FormatEntry(genEntry(t)) }),
			rapid.String(),
		)).Draw(t, "parts")
		doc := strings.Join(parts, "")
		query := rapid.SampledFrom([]string{"sales", "columns files", "title", "general"}).Draw(t, "query")
		limit := rapid.IntRange(1, 5).Draw(t, "limit")
		lines := CountLines(doc)
		for _, c := range Chunks(doc) {
			if !strings.Contains(doc, c.Text) || c.StartLine < 1 || c.EndLine < c.StartLine || c.EndLine > lines {
				t.Fatalf("chunk %+v is not a substring at valid lines of %q", c, doc)
			}
			if strings.TrimSpace(c.Text) == "" || strings.TrimSpace(c.Text) == "---" {
				t.Fatalf("empty or bare separator chunk %+v", c)
			}
		}
		got := SearchChunks(doc, query, limit)
		if len(got) > limit {
			t.Fatalf("%d results for limit %d", len(got), limit)
		}
		for _, c := range got {
			if !strings.Contains(doc, c.Text) || c.Score <= 0 {
				t.Fatalf("result %+v is not a scored substring of the doc", c)
			}
		}
	})
}

// TestPropertyChunkIndexSearchEqualsSearchChunks: one index searched with several
// queries, as text or as terms, answers each exactly as SearchChunks on the
// document does.
func TestPropertyChunkIndexSearchEqualsSearchChunks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.OneOf(
			rapid.SampledFrom([]string{"\n", "\n\n", "---\n", "## 2025-01-15\n", "# Title\n", "sales columns\n", "files of sales\n", "the title\n"}),
			rapid.Custom(func(t *rapid.T) string { return FormatEntry(genEntry(t)) }),
			rapid.String(),
		)).Draw(t, "parts")
		doc := strings.Join(parts, "")
		ix := NewChunkIndex(doc)
		for _, query := range rapid.SliceOfN(rapid.SampledFrom([]string{"sales", "columns files", "title", "the", ""}), 1, 4).Draw(t, "queries") {
			limit := rapid.IntRange(0, 5).Draw(t, "limit")
			want := SearchChunks(doc, query, limit)
			if got := ix.Search(query, limit); !reflect.DeepEqual(got, want) {
				t.Fatalf("query %q limit %d: index gives %+v, SearchChunks %+v", query, limit, got, want)
			}
			if got := ix.SearchTerms(bm25.Tokenize(query), limit); !reflect.DeepEqual(got, want) {
				t.Fatalf("query %q limit %d: SearchTerms gives %+v, SearchChunks %+v", query, limit, got, want)
			}
		}
	})
}
