package bm25

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
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
//   - words of ASCII letters are reduced to their English Snowball (Porter2) stem, so
//     "researched", "researching" and "research" are one term ("columns" → "column",
//     "painting" → "paint"); other words (digits, accented or non-Latin letters) are
//     kept as they are, since an English stemmer would only mangle them.
//
// Stemming was measured on LoCoMo (BENCHMARKS.md): BM25 over the raw turns went
// from recall@10 57.4 with plural folding alone to 61.0.
//
// The same text always gives the same terms, in text order, duplicates kept. Terms
// are an index format: a store that keeps them (Qdrant's sparse vectors) must be
// re-indexed when this function changes.
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
		if isASCIIWord(f) {
			f = stems.stem(f)
		}
		terms = append(terms, f)
	}
	return terms
}

// isASCIIWord reports whether w is made of the letters a–z only.
func isASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

func isSeparator(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r)
}

// stemCacheSize bounds the stem cache (a few MB at most; additions racing a clear
// may overshoot it by a few words): far more distinct words than a conversation's
// vocabulary.
const stemCacheSize = 1 << 15

// stems caches Snowball stems. Stemming was most of Tokenize's cost (it converts
// the word to runes and tries suffix lists step by step), while words are Zipfian:
// a few thousand make up nearly all of a text, so almost every lookup hits.
var stems stemCache

// stemCache maps words to their stems, safe for concurrent use. Why a sync.Map:
// lookups vastly outnumber additions and take no lock. Why cleared when full
// rather than evicting least recently used: a hit then costs one map lookup and
// no bookkeeping; after a clear the frequent words come back within a few texts.
type stemCache struct {
	m sync.Map // word → stem
	n atomic.Int64
}

func (c *stemCache) stem(word string) string {
	if s, ok := c.m.Load(word); ok {
		return s.(string)
	}
	// word is a substring of the text being tokenized: keep a copy, not the text.
	word = strings.Clone(word)
	s := english.Stem(word, true)
	if c.n.Add(1) > stemCacheSize {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(word, s)
	return s
}
