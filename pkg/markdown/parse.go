package markdown

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

const (
	entryHeaderPrefix = "### ["
	entryEnd          = "---"
	minuteLayout      = "2006-01-02 15:04"
	dayLayout         = "2006-01-02"
)

// entryHeaderRE is strict about the date's shape ("4:30" is not "04:30") so that a
// parsed header always re-formats to the same text.
var entryHeaderRE = regexp.MustCompile(`^### \[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\] (.*)$`)

// ParseError is one malformed entry that ParseEntries skipped.
type ParseError struct {
	Line   int // 1-based line of the entry's header
	Reason string
}

func (e ParseError) Error() string { return fmt.Sprintf("markdown: line %d: %s", e.Line, e.Reason) }

// FormatEntry renders e as header, blank line, content, blank line and "---\n". The
// time is written in UTC at minute precision and the content as SanitizeContent makes
// it, so any content parses back as one entry; content that fails Validate parses back
// sanitized.
func FormatEntry(e Entry) string {
	return entryHeaderPrefix + e.Time.UTC().Format(minuteLayout) + "] " + string(e.Category) + "\n\n" +
		SanitizeContent(e.Content) + "\n\n" + entryEnd + "\n"
}

// FormatEntries renders es with one blank line between entries; "" for none.
func FormatEntries(es []Entry) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(FormatEntry(e))
	}
	return b.String()
}

// ParseEntries returns the well-formed entries of doc in document order and one
// ParseError per malformed entry, which it skips: a header with a bad date or an unknown
// category, or an entry whose "---" is missing (the next "### [" line or the end of the
// document comes first). Text outside entries is ignored. See the package
// documentation for how lenient the parser is.
func ParseEntries(doc string) ([]Entry, []ParseError) {
	var (
		entries []Entry
		errs    []ParseError
	)
	for _, s := range scanEntries(splitLines(doc)) {
		if s.err != "" {
			errs = append(errs, ParseError{Line: s.header + 1, Reason: s.err})
			continue
		}
		entries = append(entries, s.entry)
	}
	return entries, errs
}

// entrySpan is the lines of one entry, well-formed or not.
type entrySpan struct {
	header, last int       // line indexes: the header and the entry's last line
	bodyEnd      int       // line index just past the body ("---" or the cut-off point)
	when         time.Time // zero when the header's date does not parse
	entry        Entry
	err          string // why the entry is malformed; "" when well-formed
}

// scanEntries finds every entry in lines. It is the one definition of where an entry
// starts and ends, shared by parsing, capacity trimming and chunking so they agree.
func scanEntries(lines []line) []entrySpan {
	var spans []entrySpan
	for i := 0; i < len(lines); {
		if !isEntryHeader(lines[i].text) {
			i++
			continue
		}
		s := entrySpan{header: i}
		j := i + 1
		for j < len(lines) && !isEntryEnd(lines[j].text) && !isEntryHeader(lines[j].text) {
			j++
		}
		s.bodyEnd = j
		closed := j < len(lines) && isEntryEnd(lines[j].text)
		if closed {
			s.last, i = j, j+1
		} else {
			s.last, i = j-1, j
		}
		var cat Category
		s.when, cat, s.err = parseHeader(lines[s.header].text)
		if s.err == "" && !closed {
			s.err = "entry has no closing \"---\" line"
		}
		if s.err == "" {
			body := make([]string, 0, s.bodyEnd-s.header-1)
			for _, l := range lines[s.header+1 : s.bodyEnd] {
				body = append(body, l.text)
			}
			s.entry = Entry{Time: s.when, Category: cat, Content: trimBlankLines(strings.Join(body, "\n"))}
		}
		spans = append(spans, s)
	}
	return spans
}

// parseHeader reads an entry header line. The date is returned even when the category
// is bad, because capacity trimming still needs the entry's age.
func parseHeader(text string) (time.Time, Category, string) {
	m := entryHeaderRE.FindStringSubmatch(strings.TrimRight(text, " \t"))
	if m == nil {
		return time.Time{}, "", fmt.Sprintf("header %q is not \"### [YYYY-MM-DD HH:MM] <category>\"", text)
	}
	t, err := time.Parse(minuteLayout, m[1])
	if err != nil {
		return time.Time{}, "", fmt.Sprintf("header date %q is not a valid date and time", m[1])
	}
	c, err := ParseCategory(m[2])
	if err != nil {
		return t, "", fmt.Sprintf("unknown category %q", m[2])
	}
	return t, c, ""
}

func isEntryHeader(text string) bool { return strings.HasPrefix(text, entryHeaderPrefix) }

// isEntryEnd tolerates trailing white space, which editors add and nobody sees.
func isEntryEnd(text string) bool { return strings.TrimRight(text, " \t\r") == entryEnd }
