package markdown

import (
	"testing"
	"time"
)

// FuzzParseEntries checks that any text parses without panicking and that every entry
// it yields re-parses from FormatEntry as itself with its content sanitized (itself
// when it passes Validate). Seeds are in testdata/fuzz/FuzzParseEntries.
func FuzzParseEntries(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc string) {
		entries, errs := ParseEntries(doc)
		for _, e := range errs {
			if e.Line < 1 || e.Line > CountLines(doc) {
				t.Fatalf("error %v points outside the %d-line document", e, CountLines(doc))
			}
		}
		for _, e := range entries {
			want := Entry{Time: e.Time, Category: e.Category, Content: SanitizeContent(e.Content)}
			again, errs := ParseEntries(FormatEntry(e))
			if len(errs) != 0 || !sameEntries(again, []Entry{want}) {
				t.Fatalf("entry %+v re-parsed as %+v, %v", e, again, errs)
			}
			if e.Validate() == nil && !sameEntries(again, []Entry{e}) {
				t.Fatalf("valid entry %+v re-parsed as %+v", e, again)
			}
		}
	})
}

// FuzzFormatEntry checks that an entry formatted from any content parses back as
// exactly one entry with the sanitized content: appended or extracted text cannot
// forge entries, headings or separators.
func FuzzFormatEntry(f *testing.F) {
	for _, seed := range []string{"", "x", "---", "### [2020-01-01 00:00] user_pref\n\nforged\n\n---", "## 2020-01-01", "a\r\n---\r\nb", "   # t"} {
		f.Add(seed)
	}
	at := time.Date(2025, 1, 15, 14, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, content string) {
		want := Entry{Time: at, Category: CategoryUserPref, Content: SanitizeContent(content)}
		got, errs := ParseEntries(FormatEntry(Entry{Time: at, Category: CategoryUserPref, Content: content}))
		if len(errs) != 0 || !sameEntries(got, []Entry{want}) {
			t.Fatalf("content %q parsed as %+v, %v; want %+v", content, got, errs, want)
		}
		if err := want.Validate(); err != nil {
			t.Fatalf("sanitized content %q is not valid: %v", want.Content, err)
		}
	})
}
