package processor

import (
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/textnorm"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// The text helpers below serve the rule-based processors: they are lexical on
// purpose (no model), and their limits are those documented in doc.go.

// words splits s into lower-case word tokens; apostrophes inside a word are kept
// ("i'm", "sister's") because the rules read contractions and possessives.
func words(s string) []string { return appendWords(nil, s) }

// appendWords appends the words of s to ws.
func appendWords(ws []string, s string) []string {
	for w := range eachWord(s) {
		ws = append(ws, w)
	}
	return ws
}

// apostrophes are the runes a word is trimmed of: the ASCII one and those
// foldQuotes maps to it.
const apostrophes = "'" + textnorm.TypographicQuotes

// eachWord yields the words of s, in order. It scans s once and lower-cases each
// word on its own, so a word already in lower case is a substring of s, not a
// copy. Case and quotes map rune by rune, so a field found in s is the field a
// split of the mapped text finds.
func eachWord(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		start, ascii := -1, true
		for i, r := range s {
			switch {
			case isWordRune(r):
				if start < 0 {
					start, ascii = i, true
				}
				ascii = ascii && r < utf8.RuneSelf
			case start >= 0:
				if w := word(s[start:i], ascii); w != "" && !yield(w) {
					return
				}
				start = -1
			}
		}
		if start >= 0 {
			if w := word(s[start:], ascii); w != "" {
				yield(w)
			}
		}
	}
}

// word is the word of a field of s: trimmed of apostrophes, lower case, its
// quotes folded. An ASCII field (most are) holds no typographic quote, which
// spares it the slower non-ASCII trim and the search for them.
func word(field string, ascii bool) string {
	if ascii {
		return strings.ToLower(strings.Trim(field, "'"))
	}
	return textnorm.FoldQuotes(strings.ToLower(strings.Trim(field, apostrophes)))
}

// sentence is one sentence of a message and whether it asks something.
type sentence struct {
	text     string // trimmed, without its final punctuation
	question bool
}

// splitSentences cuts s at '.', '!', '?', ';' and line breaks when followed by
// white space or the end (so "3.5" and "example.com" stay whole), and at a comma
// that introduces a question ("I moved, what should I pack?").
func splitSentences(s string) []sentence {
	var out []sentence
	emit := func(text string, question bool) {
		text = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), ".!?;,:"))
		if text != "" {
			out = append(out, sentence{text: text, question: question})
		}
	}
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next := i + size
		atBoundary := next >= len(s) || s[next] == ' ' || s[next] == '\n' || s[next] == '\t'
		switch {
		case r == '\n':
			emit(s[start:i], false)
			start = next
		case r == '。' || r == '！' || r == '？' || r == '；':
			emit(s[start:next], r == '？')
			start = next
		case r == '.' && atBoundary && ordinalBefore(s[start:i]):
			// "am 1. Juli": a German ordinal, not the end of a sentence.
		case (r == '.' || r == '!' || r == '?' || r == ';') && atBoundary:
			emit(s[start:next], r == '?')
			start = next
		case r == ',' && atBoundary && startsQuestion(s[next:]) && strings.ContainsRune(s[next:], '?'):
			emit(s[start:i], false)
			start = next
		}
		i = next
	}
	emit(s[start:], strings.HasSuffix(strings.TrimSpace(s[start:]), "?"))
	return out
}

// ordinalBefore reports whether s ends with a number of one or two digits
// after a space: "15." in "am 15. März" is an ordinal.
func ordinalBefore(s string) bool {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n := len(s) - i
	return n >= 1 && n <= 2 && i > 0 && s[i-1] == ' '
}

// questionWords open a question when they start a sentence.
var questionWords = setOf("what", "what's", "how", "why", "when", "where", "who", "whom", "whose", "which",
	"is", "are", "am", "was", "were", "can", "could", "do", "does", "did", "should", "would", "will", "shall",
	"may", "might", "isn't", "aren't", "don't", "doesn't", "can't", "won't")

// startsQuestion reports whether s opens with a question word.
func startsQuestion(s string) bool {
	return questionWords[firstWord(s)]
}

// firstWord is words(s)[0], or "" when s has none. It reads only as far as the
// first word: splitSentences asks at every comma whether the rest of the text
// opens a question, and tokenizing that whole rest each time made long messages
// quadratic.
func firstWord(s string) string {
	for w := range eachWord(s) {
		return w
	}
	return ""
}

// isWordRune reports whether r, once lower-cased and quote-folded, belongs to a
// word of words.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '\''
	}
	r = unicode.ToLower(r)
	return unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(textnorm.TypographicQuotes, r)
}

// cleanStatement is the stored form of a statement: single spaces, first letter
// upper case, one final period (or the question mark it had).
func cleanStatement(s string) string {
	s = textnorm.SingleSpaced(s)
	s = strings.TrimLeft(s, " ,:;-")
	end := "."
	if strings.HasSuffix(s, "?") {
		end = "?"
	}
	s = strings.TrimRight(s, " .!?;,:")
	if s == "" {
		return ""
	}
	return textnorm.UpperFirst(s) + end
}

func setOf(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// recordText is the statement of a memory: its text, or its metadata thing/fact
// when the text is empty.
func recordText(r vectorstore.Record) string {
	if r.Text != "" {
		return r.Text
	}
	for _, k := range []string{records.MetaThing, records.MetaFact} {
		if s, ok := r.Metadata[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}
