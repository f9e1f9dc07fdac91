package processor

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/textnorm"
)

// textGen draws texts made of arbitrary strings and of the runes the text helpers
// treat specially: apostrophes, case folds that change a rune's length (İ) or map
// outside ASCII (K, ſ), combining marks, letters and digits of other scripts,
// invalid UTF-8, white space of every kind and sentence punctuation.
func textGen() *rapid.Generator[string] {
	special := rapid.SampledFrom([]string{"’", "‘", "ʼ", "'", "İ", "K", "ſ", "\xff", " ", "  ", "\t", "\n", "\u00a0",
		"\u2003", ",", ".", "?", "!", ";", ":", "é", "e\u0301", "Ⅻ", "٣", "I", "My", "what", "moved", "Berlin"})
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOf(rapid.OneOf(rapid.String(), special)).Draw(t, "parts"), "")
	})
}

// referenceWords is the definition words implements in one scan: split the
// lower-cased, quote-folded text at every rune that is not a letter, a digit or
// an apostrophe, and trim the apostrophes of each field.
func referenceWords(s string) []string {
	fields := strings.FieldsFunc(textnorm.FoldQuotes(strings.ToLower(s)), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'')
	})
	var out []string
	for _, f := range fields {
		if f = strings.Trim(f, "'"); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func TestPropertyWordsIsTheSplitOfTheMappedText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := textGen().Draw(t, "text")
		if got, want := words(s), referenceWords(s); !slices.Equal(got, want) {
			t.Fatalf("words(%q) = %q, want %q", s, got, want)
		}
	})
}

// Decide tokenizes a text once and reads each sentence's words as a run of the
// text's words; that is exact only if the sentences' words, in order, are the
// text's.
func TestPropertySentenceWordsAreTheTextsWords(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := textGen().Draw(t, "text")
		var got []string
		for _, sen := range splitSentences(s) {
			got = append(got, words(sen.text)...)
		}
		if want := words(s); !slices.Equal(got, want) {
			t.Fatalf("words of the sentences of %q = %q, words of the text %q", s, got, want)
		}
	})
}

func TestPropertySingleSpacedIsJoinFields(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := textGen().Draw(t, "text")
		if got, want := textnorm.SingleSpaced(s), strings.Join(strings.Fields(s), " "); got != want {
			t.Fatalf("textnorm.SingleSpaced(%q) = %q, want %q", s, got, want)
		}
	})
}

// statementKind looks each word up once; the result must be the first kind, in
// order, that lists one of the words.
func TestPropertyStatementKindIsTheFirstMatchingKind(t *testing.T) {
	var vocab []string
	for _, k := range statementKinds {
		for _, w := range k.words {
			vocab = append(vocab, w, w+"'s")
		}
	}
	vocab = append(vocab, "i", "the", "hiking", "'s")
	rapid.Check(t, func(t *rapid.T) {
		ws := rapid.SliceOf(rapid.SampledFrom(vocab)).Draw(t, "words")
		want := "personal fact or event"
	kinds:
		for _, k := range statementKinds {
			for _, w := range ws {
				if slices.Contains(k.words, strings.TrimSuffix(w, "'s")) {
					want = k.kind
					break kinds
				}
			}
		}
		if got := statementKind(slices.Values(ws)); got != want {
			t.Fatalf("statementKind(%q) = %q, want %q", ws, got, want)
		}
	})
}
