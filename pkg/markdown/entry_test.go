package markdown

import (
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParseCategory(t *testing.T) {
	for _, c := range []Category{CategoryFilePattern, CategoryUserPref, CategoryErrorSolution, CategoryGeneral} {
		if !c.Valid() {
			t.Errorf("%q not Valid", c)
		}
		for _, s := range []string{string(c), strings.ToUpper(string(c)), " " + string(c) + "\t"} {
			if got, err := ParseCategory(s); err != nil || got != c {
				t.Errorf("ParseCategory(%q) = %q, %v; want %q", s, got, err, c)
			}
		}
	}
	for _, s := range []string{"", "gossip", "file-pattern", "general extra"} {
		if Category(s).Valid() {
			t.Errorf("%q is Valid", s)
		}
		if _, err := ParseCategory(s); !errors.Is(err, ErrUnknownCategory) || !strings.Contains(err.Error(), s) {
			t.Errorf("ParseCategory(%q) error = %v, want ErrUnknownCategory naming the input", s, err)
		}
	}
}

func TestEntryValidate(t *testing.T) {
	at := time.Date(2025, 1, 15, 14, 30, 0, 0, time.UTC)
	tests := []struct {
		name string
		e    Entry
		ok   bool
	}{
		{"valid", Entry{Time: at, Category: CategoryGeneral, Content: "x\n\n- list\n***"}, true},
		{"sub-minute time is fine", Entry{Time: at.Add(17 * time.Second), Category: CategoryGeneral, Content: "x"}, true},
		{"unknown category", Entry{Time: at, Category: "gossip", Content: "x"}, false},
		{"zero time", Entry{Category: CategoryGeneral, Content: "x"}, false},
		{"year 10000", Entry{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Category: CategoryGeneral, Content: "x"}, false},
		{"separator line", Entry{Time: at, Category: CategoryGeneral, Content: "a\n---\nb"}, false},
		{"separator with trailing space", Entry{Time: at, Category: CategoryGeneral, Content: "a\n--- \nb"}, false},
		{"header line", Entry{Time: at, Category: CategoryGeneral, Content: "a\n### [x"}, false},
		{"CRLF", Entry{Time: at, Category: CategoryGeneral, Content: "a\r\nb"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Validate()
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidEntry)) {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestPropertySanitizedContentIsValidAndRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lines := rapid.SliceOf(rapid.OneOf(rapid.SampledFrom(trickyLines), rapid.String())).Draw(t, "lines")
		content := SanitizeContent(strings.Join(lines, "\n"))
		e := Entry{Time: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC), Category: CategoryErrorSolution, Content: content}
		if err := e.Validate(); err != nil {
			t.Fatalf("sanitized content %q invalid: %v", content, err)
		}
		got, errs := ParseEntries(FormatEntry(e))
		if len(errs) != 0 || !sameEntries(got, []Entry{e}) {
			t.Fatalf("round trip of %q gave %v, %v", content, got, errs)
		}
		if SanitizeContent(content) != content {
			t.Fatalf("SanitizeContent is not idempotent on %q", content)
		}
	})
}

// Issue 30.7: NUL and bidirectional controls never reach a memory file, and
// nothing else of the text is lost.
func TestPropertySanitizedContentHasNoNULOrBidiControls(t *testing.T) {
	unsafe := []rune{0, '\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069'}
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.StringMatching(`[a-zA-Zé字 .,]{0,8}`)).Draw(t, "parts")
		var with, without strings.Builder
		for _, p := range parts {
			with.WriteString(p)
			with.WriteRune(rapid.SampledFrom(unsafe).Draw(t, "control"))
			without.WriteString(p)
		}
		if got := StripUnsafe(with.String()); got != without.String() {
			t.Fatalf("StripUnsafe(%q) = %q, want %q", with.String(), got, without.String())
		}
		doc := FormatEntry(Entry{Time: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC), Category: CategoryGeneral, Content: with.String()}) +
			FormatLongTerm(time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC), with.String()) + FormatDailyNote(time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC), with.String())
		if i := strings.IndexFunc(doc, unsafeRune); i >= 0 {
			t.Fatalf("formatted Markdown holds %U at %d: %q", []rune(doc[i:])[0], i, doc)
		}
	})
}
