package extract

import (
	"github.com/agentmem/agentmem/pkg/textnorm"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// fillerRe matches conversational openers that carry no meaning ("Oh and, ").
var fillerRe = regexp.MustCompile(`(?i)^(?:(?:ok(?:ay)?|also|and|oh|so|btw|by the way|fyi|just so you know|one more thing|hey|hi|hello|thanks|thank you)\b[\s,:;!.\-–—]*)+`)

// sentence is a sentence of a message, or a line of one of its fenced code blocks.
// Preferences and "remember" statements are made in words, so the rules that look
// for them skip code, which would only produce false matches.
type sentence struct {
	text string
	code bool
}

// sentences splits text into trimmed, non-empty sentences: at line breaks, after
// runs of . ! ? … followed by a space, and after 。！？ (Chinese puts no space). A dot inside a token ("sales.csv", "1.5") does
// not split. Lines inside ``` fences are code.
func sentences(text string) []sentence {
	var out []sentence
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			if s := strings.TrimSpace(line); s != "" {
				out = append(out, sentence{text: s, code: true})
			}
			continue
		}
		start := 0
		for i, r := range line {
			if !isTerminator(r) {
				continue
			}
			next := i + utf8.RuneLen(r)
			if next < len(line) && (line[next] == ' ' || line[next] == '\t' || isFullWidthTerminator(r)) {
				if s := strings.TrimSpace(line[start:next]); s != "" {
					out = append(out, sentence{text: s})
				}
				start = next
			}
		}
		if s := strings.TrimSpace(line[start:]); s != "" {
			out = append(out, sentence{text: s})
		}
	}
	return out
}

func isTerminator(r rune) bool {
	return r == '.' || r == '!' || r == '?' || r == '…' || isFullWidthTerminator(r)
}

// isFullWidthTerminator: Chinese ends a sentence with 。！？ and no space after.
func isFullWidthTerminator(r rune) bool { return r == '。' || r == '！' || r == '？' }

func isQuestion(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasSuffix(s, "?") || strings.HasSuffix(s, "？") || strings.HasSuffix(s, "吗") || strings.HasSuffix(s, "呢")
}

// stripFiller removes conversational openers.
func stripFiller(s string) string {
	return strings.TrimSpace(fillerRe.ReplaceAllString(strings.TrimSpace(s), ""))
}

// tidy collapses white space and capitalises the first letter, so that entries read
// as sentences whatever the speaker typed.
func tidy(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return textnorm.UpperFirst(strings.TrimLeft(s, " ,;:-–—"))
}

// clip bounds s to n runes, at a word boundary when there is one.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	cut := string(r[:n])
	if i := strings.LastIndexByte(cut, ' '); i > n/2 {
		cut = cut[:i]
	}
	return cut + "…"
}

// meaningful reports whether s has a word that is not a pronoun or filler: "I prefer
// that" or "don't use it" name nothing to remember.
func meaningful(s string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	}) {
		if !emptyWords[w] {
			return true
		}
	}
	return false
}

var emptyWords = setOf("it", "that", "this", "them", "those", "these", "one", "ones", "so", "too",
	"you", "to", "not", "either", "neither", "the", "a", "an", "idea", "way", "please", "thanks",
	"much", "more", "better", "lot", "do", "just", "again", "same", "one's", "yours", "mine",
	"here", "there", "now", "then", "really", "very", "also", "instead", "both", "all", "is", "was",
	"be", "i", "me", "we", "us", "anyway", "though", "thing", "stuff", "ok", "okay", "yes", "no")

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}
