package bm25

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// stopwords are frequent English function words. The list is deliberately small: a
// word missing here only costs a little ranking precision, while a content word wrongly
// listed here could never be found.
var stopwords = func() map[string]struct{} {
	set := map[string]struct{}{}
	for _, w := range strings.Fields(`a an and are as at be been but by can do does for from
		had has have he her his how i if in into is it its me my of on or our she so than
		that the their them then there these they this those to was we were what when where
		which who why will with you your`) {
		set[w] = struct{}{}
	}
	return set
}()

// Tokenize turns text into index terms:
//
//   - text is lowercased and split on every rune that is not a Unicode letter, digit or
//     combining mark (marks are kept so decomposed accents do not split a word);
//   - stopwords (a short English list) are dropped;
//   - one-rune tokens are dropped unless they are a digit; this also removes the "s" of
//     a possessive ("user's" gives "user"), because the apostrophe splits it off;
//   - a trailing "s" is stripped from tokens longer than four runes unless they end in
//     "ss", "us" or "is" ("columns" → "column", "files" → "file", but "class",
//     "status" and "analysis" stay), a plural folding that is crude but deterministic.
//
// The same text always gives the same terms, in text order, duplicates kept.
func Tokenize(text string) []string {
	var terms []string
	for _, f := range strings.FieldsFunc(strings.ToLower(text), isSeparator) {
		if _, stop := stopwords[f]; stop {
			continue
		}
		n := utf8.RuneCountInString(f)
		if n == 1 && !unicode.IsDigit([]rune(f)[0]) {
			continue
		}
		if n > 4 && strings.HasSuffix(f, "s") &&
			!strings.HasSuffix(f, "ss") && !strings.HasSuffix(f, "us") && !strings.HasSuffix(f, "is") {
			f = f[:len(f)-1]
		}
		terms = append(terms, f)
	}
	return terms
}

func isSeparator(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r)
}
