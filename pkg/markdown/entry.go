package markdown

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Category says what an entry is about; it decides which file the entry goes to (SPEC A4).
type Category string

// The categories an extractor may return (SPEC A3).
const (
	CategoryFilePattern   Category = "file_pattern"
	CategoryUserPref      Category = "user_pref"
	CategoryErrorSolution Category = "error_solution"
	CategoryGeneral       Category = "general"
)

// Sentinel errors, wrapped with what exactly is wrong.
var (
	ErrUnknownCategory = errors.New("markdown: unknown category")
	ErrInvalidEntry    = errors.New("markdown: invalid entry")
)

// Entry is one memory entry (SPEC A6):
//
//	### [2025-01-15 14:30] file_pattern
//
//	Sales files: columns date, product, qty.
//
//	---
type Entry struct {
	Time     time.Time // minute precision, UTC
	Category Category
	Content  string // body, without surrounding blank lines
}

// Valid reports whether c is one of the four known categories.
func (c Category) Valid() bool {
	switch c {
	case CategoryFilePattern, CategoryUserPref, CategoryErrorSolution, CategoryGeneral:
		return true
	}
	return false
}

// ParseCategory reads a category name, ignoring surrounding space and case, because
// LLMs and people write "General" as often as "general".
func ParseCategory(s string) (Category, error) {
	c := Category(strings.ToLower(strings.TrimSpace(s)))
	if !c.Valid() {
		return "", fmt.Errorf("%w %q: want file_pattern, user_pref, error_solution or general", ErrUnknownCategory, s)
	}
	return c, nil
}

// Validate reports what would stop e from surviving FormatEntry and ParseEntries
// unchanged: an unknown category, a zero time or one outside years 0000–9999, or
// content with a line that SanitizeContent changes: one that would end the entry
// ("---"), start a heading ("#" after at most three spaces: "### [" starts another
// entry, "## YYYY-MM-DD" a long-term section, "### HH:MM" a daily-note item), end in
// a carriage return or hold NUL or a bidirectional control (StripUnsafe).
// Sub-minute precision and surrounding blank lines are not errors: FormatEntry
// drops them. SanitizeContent turns any text into valid content.
func (e Entry) Validate() error {
	if !e.Category.Valid() {
		return fmt.Errorf("%w: %w %q", ErrInvalidEntry, ErrUnknownCategory, e.Category)
	}
	if y := e.Time.UTC().Year(); e.Time.IsZero() || y < 0 || y > 9999 {
		return fmt.Errorf("%w: time %v is zero or outside years 0000-9999", ErrInvalidEntry, e.Time)
	}
	for i, l := range strings.Split(e.Content, "\n") {
		switch {
		case isEntryEnd(l):
			return fmt.Errorf("%w: content line %d %q would end the entry", ErrInvalidEntry, i+1, l)
		case isHeading(l):
			return fmt.Errorf("%w: content line %d %q would start a heading", ErrInvalidEntry, i+1, l)
		case strings.HasSuffix(l, "\r"):
			return fmt.Errorf("%w: content line %d ends in a carriage return", ErrInvalidEntry, i+1)
		case strings.ContainsFunc(l, unsafeRune):
			return fmt.Errorf("%w: content line %d holds NUL or a bidirectional control", ErrInvalidEntry, i+1)
		}
	}
	return nil
}

// SanitizeContent makes text valid entry content with the least visible change, so
// that text from outside (an agent's append, an extracted entry, a model's reply)
// can never forge the structure of a memory file: CRLF and trailing carriage returns
// become plain line ends, a "---" line becomes "***" (the same horizontal rule in
// Markdown) and a heading line ("#" after at most three spaces) gets a backslash
// before its first "#" ("\### [2020-01-01 00:00] user_pref", "\## 2020-01-01", shown
// as literal text). NUL and bidirectional controls are removed (StripUnsafe).
// Surrounding blank lines are removed. FormatEntry, FormatLongTerm and
// FormatDailyNote apply it to their content.
func SanitizeContent(text string) string {
	lines := strings.Split(StripUnsafe(text), "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		switch {
		case isEntryEnd(l):
			l = "***"
		case isHeading(l):
			at := strings.IndexByte(l, '#')
			l = l[:at] + `\` + l[at:]
		}
		lines[i] = l
	}
	return trimBlankLines(strings.Join(lines, "\n"))
}

// StripUnsafe removes what must never reach a memory file: NUL, and the
// bidirectional embedding, override and isolate controls (U+202A–U+202E,
// U+2066–U+2069), which make a file show other text than it holds ("Trojan
// Source"). Text without them is returned as it is.
func StripUnsafe(text string) string {
	if !strings.ContainsFunc(text, unsafeRune) {
		return text
	}
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return -1
		}
		return r
	}, text)
}

func unsafeRune(r rune) bool {
	return r == 0 || (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069')
}

// isHeading reports a line that Markdown, or this package's parsers, would read as a
// heading: "#" after at most three spaces.
func isHeading(text string) bool {
	for i := 0; i < len(text) && i < 4; i++ {
		switch text[i] {
		case '#':
			return true
		case ' ':
		default:
			return false
		}
	}
	return false
}
