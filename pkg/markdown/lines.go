package markdown

import "strings"

// A line is the text up to and including a "\n", or the non-empty text after the last
// "\n". So "" has no lines, "a" and "a\n" have one, "a\n\n" has two (the second empty),
// and a "\r" before the "\n" belongs to the line ending (CRLF). A lone "\r" does not end
// a line.

// CountLines returns the number of lines in doc.
func CountLines(doc string) int {
	n := strings.Count(doc, "\n")
	if doc != "" && !strings.HasSuffix(doc, "\n") {
		n++
	}
	return n
}

// Head returns the first min(n, CountLines(doc)) lines of doc, byte for byte, with their
// line endings: always a prefix of doc. n <= 0 gives "".
func Head(doc string, n int) string {
	end := 0
	for ; n > 0; n-- {
		i := strings.IndexByte(doc[end:], '\n')
		if i < 0 {
			return doc
		}
		end += i + 1
	}
	return doc[:end]
}

// line is one line of a document.
type line struct {
	text  string // without the line ending and any carriage returns before it
	start int    // byte offset of the line in the document
	next  int    // byte offset just past its line ending
}

func splitLines(doc string) []line {
	var lines []line
	for start := 0; start < len(doc); {
		next := len(doc)
		raw := doc[start:]
		if i := strings.IndexByte(raw, '\n'); i >= 0 {
			next = start + i + 1
			raw = raw[:i]
		}
		lines = append(lines, line{text: strings.TrimRight(raw, "\r"), start: start, next: next})
		start = next
	}
	return lines
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// trimBlankLines drops leading and trailing lines that are empty or only white space.
func trimBlankLines(s string) string {
	lines := strings.Split(s, "\n")
	first, last := 0, len(lines)-1
	for first <= last && isBlank(lines[first]) {
		first++
	}
	for last >= first && isBlank(lines[last]) {
		last--
	}
	return strings.Join(lines[first:last+1], "\n")
}
