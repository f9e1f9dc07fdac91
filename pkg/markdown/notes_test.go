package markdown

import (
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// legacySection is a long-term section as memory_append wrote it before it wrote
// entries: files holding them are still read.
func legacySection(day time.Time, content string) string {
	return formatItem("## "+day.UTC().Format(dayLayout), content)
}

func TestFormatLongTermAndAppend(t *testing.T) {
	day := time.Date(2025, 1, 15, 23, 30, 0, 0, time.FixedZone("EST", -5*3600)) // 2025-01-16 in UTC
	sec := FormatLongTerm(day, "\n  fiscal year starts in April  \n\n")
	if want := "### [2025-01-16 04:30] general\n\n  fiscal year starts in April  \n\n---\n"; sec != want {
		t.Errorf("FormatLongTerm = %q, want %q", sec, want)
	}
	// One format: what append writes parses back as the entry it is, next to
	// the extractor's entries and the sections of older files.
	doc := AppendBlock(AppendBlock(FormatEntry(Entry{Time: day, Category: CategoryUserPref, Content: "dark charts"}),
		legacySection(day, "an old section")), sec)
	entries, errs := ParseEntries(doc)
	if len(errs) != 0 || len(entries) != 2 || entries[1].Category != CategoryGeneral || entries[1].Content != "  fiscal year starts in April  " ||
		!entries[1].Time.Equal(time.Date(2025, 1, 16, 4, 30, 0, 0, time.UTC)) || entries[0].Content != "dark charts" {
		t.Errorf("ParseEntries of extracted, legacy and appended blocks = %+v, %v\n%s", entries, errs, doc)
	}
	if _, blocks := SplitBlocks(doc); len(blocks) != 3 || !strings.HasPrefix(blocks[1].Text, "## 2025-01-16") || !blocks[2].IsEntry {
		t.Errorf("blocks of extracted, legacy and appended content: %+v", blocks)
	}
	tests := []struct{ name, doc, want string }{
		{"empty doc", "", sec},
		{"no final newline", "# Memory", "# Memory\n\n" + sec},
		{"final newline", "# Memory\n", "# Memory\n\n" + sec},
		{"already blank line", "# Memory\n\n", "# Memory\n\n" + sec},
		{"CRLF blank line", "# Memory\r\n\r\n", "# Memory\r\n\r\n" + sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendBlock(tt.doc, sec)
			if got != tt.want {
				t.Errorf("AppendBlock(%q) = %q, want %q", tt.doc, got, tt.want)
			}
			if !strings.HasPrefix(got, tt.doc) {
				t.Errorf("AppendBlock changed the existing text")
			}
		})
	}
}

func TestDailyNoteName(t *testing.T) {
	day := time.Date(2025, 1, 5, 23, 0, 0, 0, time.FixedZone("X", -3*3600)) // 2025-01-06 UTC
	if got := DailyNoteName(day); got != "202501/20250106.md" {
		t.Errorf("DailyNoteName = %q", got)
	}
	got, ok := ParseDailyNoteName("202501/20250106.md")
	if !ok || !got.Equal(time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)) || got.Location() != time.UTC {
		t.Errorf("ParseDailyNoteName = %v, %v", got, ok)
	}
	for _, bad := range []string{"", "20250106.md", "202502/20250106.md", "202501/20250132.md", "202501/20250106.txt",
		"../202501/20250106.md", "202501/20250106.md/x", "2025-01/2025-01-06.md", "202501\\20250106.md"} {
		if _, ok := ParseDailyNoteName(bad); ok {
			t.Errorf("ParseDailyNoteName(%q) accepted", bad)
		}
	}
}

func TestPropertyDailyNoteNameRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		day := time.Unix(rapid.Int64Range(minMinute, maxMinute).Draw(t, "minute")*60, 0).UTC()
		got, ok := ParseDailyNoteName(DailyNoteName(day))
		if want := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC); !ok || !got.Equal(want) {
			t.Fatalf("name %q parsed as %v, %v; want %v", DailyNoteName(day), got, ok, want)
		}
	})
}

func TestParseDailyNote(t *testing.T) {
	day := time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC)
	doc := "# Notes for today\r\n\r\n### 09:05\r\n\r\nfirst\r\n\r\n### 25:00 not a time\n### 14:30\n\nsecond\nline two\n"
	got := ParseDailyNote(day, doc)
	want := []NoteItem{
		{Time: time.Date(2025, 1, 15, 9, 5, 0, 0, time.UTC), Content: "first\n\n### 25:00 not a time"},
		{Time: time.Date(2025, 1, 15, 14, 30, 0, 0, time.UTC), Content: "second\nline two"},
	}
	if len(got) != len(want) {
		t.Fatalf("items = %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Content != want[i].Content {
			t.Errorf("item %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if items := ParseDailyNote(day, "just a title\n"); len(items) != 0 {
		t.Errorf("preamble parsed as items: %+v", items)
	}
}

func TestPropertyDailyNoteAppendParseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		day := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
		n := rapid.IntRange(0, 5).Draw(t, "items")
		doc := rapid.SampledFrom([]string{"", "# Daily note\n", "title without newline"}).Draw(t, "preamble")
		var want []NoteItem
		for range n {
			at := day.Add(time.Duration(rapid.IntRange(0, 24*60-1).Draw(t, "minute")) * time.Minute)
			content := genContent(t)
			// An item heading inside content would legitimately split the item.
			if slices.ContainsFunc(strings.Split(content, "\n"), dailyItemRE.MatchString) {
				content = "plain"
			}
			doc = AppendBlock(doc, FormatDailyNote(at, content))
			want = append(want, NoteItem{Time: at, Content: content})
		}
		got := ParseDailyNote(day, doc)
		if len(got) != len(want) {
			t.Fatalf("got %d items, want %d\ndoc:\n%s", len(got), len(want), doc)
		}
		for i := range want {
			if !got[i].Time.Equal(want[i].Time) || got[i].Content != want[i].Content {
				t.Fatalf("item %d = %+v, want %+v\ndoc:\n%s", i, got[i], want[i], doc)
			}
		}
	})
}

// TestPropertyAppendedContentCannotForgeStructure: a daily-note item or long-term
// section formatted from any content parses back as exactly one item with the
// sanitized content, and adds no entry to the document.
func TestPropertyAppendedContentCannotForgeStructure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		day := time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC)
		at := day.Add(time.Duration(rapid.IntRange(0, 24*60-1).Draw(t, "minute")) * time.Minute)
		content := strings.Join(rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(trickyLines), rapid.String()), 0, 6).Draw(t, "lines"), "\n")
		items := ParseDailyNote(day, FormatDailyNote(at, content))
		if len(items) != 1 || !items[0].Time.Equal(at) || items[0].Content != SanitizeContent(content) {
			t.Fatalf("ParseDailyNote(FormatDailyNote(%q)) = %+v; want one item at %v with %q", content, items, at, SanitizeContent(content))
		}
		doc := AppendBlock(FormatEntry(Entry{Time: at, Category: CategoryGeneral, Content: "kept"}), legacySection(day, content))
		entries, errs := ParseEntries(doc)
		if len(entries) != 1 || len(errs) != 0 {
			t.Fatalf("a long-term section of %q changed the entries: %+v, %v\ndoc:\n%s", content, entries, errs, doc)
		}
		if n := strings.Count("\n"+doc, "\n## "); n != 1 {
			t.Fatalf("a long-term section of %q has %d section headings\ndoc:\n%s", content, n, doc)
		}
		doc = AppendBlock(doc, FormatLongTerm(at, content))
		entries, errs = ParseEntries(doc)
		if len(entries) != 2 || len(errs) != 0 || entries[1].Content != SanitizeContent(content) || entries[1].Category != CategoryGeneral {
			t.Fatalf("a long-term append of %q is not one general entry: %+v, %v\ndoc:\n%s", content, entries, errs, doc)
		}
	})
}
