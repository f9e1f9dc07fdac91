package markdown

import (
	"regexp"
	"strings"
	"time"
)

var (
	sectionHeadingRE = regexp.MustCompile(`^## (\d{4}-\d{2}-\d{2})[ \t]*$`)
	dailyItemRE      = regexp.MustCompile(`^### (\d{2}:\d{2})[ \t]*$`)
	dailyNameRE      = regexp.MustCompile(`^(\d{6})/(\d{8})\.md$`)
)

// AppendBlock appends block (a formatted entry, long-term section or daily-note item)
// to doc so that exactly one blank line separates it from what was there: doc is never
// changed, only extended — a missing final line ending is added, then a blank line
// unless doc already ends with one. An empty doc gives block itself. Appending entries
// one by one gives the same text as FormatEntries.
func AppendBlock(doc, block string) string {
	if doc == "" {
		return block
	}
	if !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	if lines := splitLines(doc); !isBlank(lines[len(lines)-1].text) {
		doc += "\n"
	}
	return doc + block
}

// FormatLongTerm renders what memory_append(slot=long_term) appends to MEMORY.md
// (SPEC A9): content as an entry of category general at time at (SPEC A6), so
// MEMORY.md holds one format whoever writes it, and ParseEntries reads appended
// content back like extracted content. Append it with AppendBlock.
func FormatLongTerm(at time.Time, content string) string {
	return FormatEntry(Entry{Time: at, Category: CategoryGeneral, Content: content})
}

// DailyNoteName returns the daily note's path for the UTC date of day:
// "YYYYMM/YYYYMMDD.md".
func DailyNoteName(day time.Time) string { return day.UTC().Format("200601/20060102.md") }

// ParseDailyNoteName is the inverse of DailyNoteName: it returns midnight UTC of the
// note's date, and false for any other name (also when the folder and date disagree).
func ParseDailyNoteName(name string) (time.Time, bool) {
	m := dailyNameRE.FindStringSubmatch(name)
	if m == nil || m[1] != m[2][:6] {
		return time.Time{}, false
	}
	t, err := time.Parse("20060102", m[2])
	return t, err == nil
}

// NoteItem is one appended item of a daily note.
type NoteItem struct {
	Time    time.Time // the note's day plus the item's HH:MM, UTC
	Content string    // without surrounding blank lines
}

// FormatDailyNote renders one daily-note item: "### HH:MM" (UTC), a blank line, content
// as SanitizeContent makes it, and a line ending. Append it with AppendBlock, so items
// are separated by one blank line; a "### HH:MM" line in content is escaped, so the
// item parses back as one item with the sanitized content.
func FormatDailyNote(t time.Time, content string) string {
	return formatItem("### "+t.UTC().Format("15:04"), content)
}

// ParseDailyNote returns the items of a daily note for the UTC date of day: each
// "### HH:MM" line starts an item that runs to the next one. Text before the first item
// (a title someone added) is not an item.
func ParseDailyNote(day time.Time, doc string) []NoteItem {
	y, mo, d := day.UTC().Date()
	var items []NoteItem
	var body []string
	flush := func() {
		if len(items) > 0 {
			items[len(items)-1].Content = trimBlankLines(strings.Join(body, "\n"))
		}
		body = body[:0]
	}
	for _, l := range splitLines(doc) {
		m := dailyItemRE.FindStringSubmatch(l.text)
		if m == nil {
			body = append(body, l.text)
			continue
		}
		hm, err := time.Parse("15:04", m[1])
		if err != nil { // "25:00" has the shape but is no time: keep it as text
			body = append(body, l.text)
			continue
		}
		flush()
		items = append(items, NoteItem{Time: time.Date(y, mo, d, hm.Hour(), hm.Minute(), 0, 0, time.UTC)})
	}
	flush()
	return items
}

// formatItem renders a heading and content as SanitizeContent makes it, so that
// appended text cannot add sections, items or entries of its own.
func formatItem(heading, content string) string {
	if c := SanitizeContent(content); c != "" {
		return heading + "\n\n" + c + "\n"
	}
	return heading + "\n"
}

// isSectionHeading reports a long-term section heading "## YYYY-MM-DD" and its date.
func isSectionHeading(text string) (time.Time, bool) {
	m := sectionHeadingRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	t, err := time.Parse(dayLayout, m[1])
	return t, err == nil
}
