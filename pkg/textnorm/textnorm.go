// Package textnorm holds the text normal forms that the record schema
// (pkg/records) and the lexical processors (pkg/processor) share: quotes folded
// to ASCII, single spacing, the comparison form of a statement (the one a fact
// record's id is derived from) and shortening at a word boundary.
package textnorm

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// TypographicQuotes are the apostrophes FoldQuotes maps to ASCII ones.
const TypographicQuotes = "\u2019\u2018\u02bc"

var quoteFolder = strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u02bc", "'")

// FoldQuotes maps typographic apostrophes to ASCII ones so "I’m" and "I'm" match.
// Most text has none; it is then returned as is, without the two allocations of a
// Replace.
func FoldQuotes(s string) string {
	if !hasTypographicQuote(s) {
		return s
	}
	return quoteFolder.Replace(s)
}

// hasTypographicQuote is strings.ContainsAny(s, TypographicQuotes), several times
// faster: ContainsAny decodes every rune of s against a non-ASCII set, Contains
// searches for each quote's first byte.
func hasTypographicQuote(s string) bool {
	return strings.Contains(s, "\u2019") || strings.Contains(s, "\u2018") || strings.Contains(s, "\u02bc")
}

// Normalize is the comparison form of a statement: lower case, letters and
// digits only, single spaces. Two statements that differ only in case,
// punctuation or spacing normalise to the same string.
func Normalize(s string) string {
	s = FoldQuotes(strings.ToLower(s))
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case r == '\'':
			// "user's" and "users" should not collide with "user s"; dropping the
			// apostrophe keeps the word whole.
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
		default:
			space = true
		}
	}
	return b.String()
}

// Shorten cuts s to at most n bytes at a word boundary, marking the cut with "…".
func Shorten(s string, n int) string {
	s = SingleSpaced(s)
	if len(s) <= n {
		return s
	}
	cut := strings.LastIndexByte(s[:n], ' ')
	if cut <= 0 {
		cut = n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	return strings.TrimRight(s[:cut], " ,;:") + "…"
}

// SingleSpaced is strings.Join(strings.Fields(s), " "), and s itself when it is
// already single-spaced, as most statements are: that spares the split and the
// join their allocations.
func SingleSpaced(s string) string {
	if isSingleSpaced(s) {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// isSingleSpaced reports whether the only white space of s is single ASCII
// spaces between words.
func isSingleSpaced(s string) bool {
	afterSpace := true // a leading space counts as a double one
	for _, r := range s {
		if unicode.IsSpace(r) {
			if afterSpace || r != ' ' {
				return false
			}
			afterSpace = true
		} else {
			afterSpace = false
		}
	}
	return !afterSpace || s == ""
}

// UpperFirst upper-cases the first letter of s, so a stored statement reads as a
// sentence, unless the first word is code, whose case is part of its meaning
// (issue 29: "kubectl" became "Kubectl", "read_csv" "Read_csv"). A word is code
// when it is in backticks, holds a character no prose word has (_ . / \ : = ( ) <
// > [ ] { } # $ @ or a digit), has an upper-case letter after its first, or
// opens a command line (a later word of its clause is a flag such as -f or
// --all).
func UpperFirst(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || !unicode.IsLower(r) || isCode(s) {
		return s
	}
	return string(unicode.ToUpper(r)) + s[size:]
}

// isCode reports whether the first word of s is code (see UpperFirst).
func isCode(s string) bool {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return false
	}
	first := strings.TrimRight(fields[0], ".,;:!?'\"")
	if strings.ContainsAny(first, "_./\\:=()<>[]{}#$@`0123456789") {
		return true
	}
	for i, r := range first {
		if i > 0 && unicode.IsUpper(r) {
			return true
		}
	}
	for _, f := range fields[1:] {
		if strings.ContainsAny(f, ",;") {
			break // the clause ends
		}
		if len(f) > 1 && f[0] == '-' && (unicode.IsLetter(rune(f[1])) || f[1] == '-') {
			return true
		}
	}
	return false
}
