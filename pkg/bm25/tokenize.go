package bm25

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
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
//   - text is normalised to NFKC and case folded (Unicode full case folding), so
//     full-width "ＣＳＶ" and "csv", "STRASSE" and "straße" compare as the same
//     letters; ASCII text takes a fast path (lower case only, which is its fold);
//   - it is split on every rune that is not a Unicode letter, digit or combining
//     mark (marks are kept so decomposed accents do not split a word);
//   - runs of Han, Hiragana, Katakana or Hangul, which are written without spaces
//     between words, become overlapping bigrams ("销售报表" → 销售, 售报, 报表), and a
//     run of one such rune is kept as a unigram: the scheme of Lucene's CJK
//     analyzer, which needs no dictionary and matches any word of two or more
//     characters; letters of other scripts in the same word are split off them;
//   - stopwords (a short English list) are dropped;
//   - one-rune tokens are dropped unless they are a digit or a CJK rune; this also
//     removes the "s" of a possessive ("user's" gives "user"), because the
//     apostrophe splits it off;
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
	for _, f := range strings.FieldsFunc(Fold(text), isSeparator) {
		if !isASCII(f) && hasCJK(f) {
			terms = appendCJK(terms, f)
			continue
		}
		terms = appendWord(terms, f)
	}
	return terms
}

// appendWord appends the term of one word that has no CJK rune.
func appendWord(terms []string, f string) []string {
	if _, stop := stopwords[f]; stop {
		return terms
	}
	n := utf8.RuneCountInString(f)
	if n == 1 && !unicode.IsDigit([]rune(f)[0]) {
		return terms
	}
	if isASCIIWord(f) {
		f = stems.stem(f)
	}
	return append(terms, f)
}

// appendCJK appends the terms of a word with CJK runes: bigrams of each CJK run
// (the rune itself for a run of one), and the other parts as words.
func appendCJK(terms []string, f string) []string {
	runes := []rune(f)
	for i := 0; i < len(runes); {
		j := i
		cjk := IsCJK(runes[i])
		for j < len(runes) && IsCJK(runes[j]) == cjk {
			j++
		}
		switch {
		case !cjk:
			terms = appendWord(terms, string(runes[i:j]))
		case j-i == 1:
			terms = append(terms, string(runes[i]))
		default:
			for k := i; k+1 < j; k++ {
				terms = append(terms, string(runes[k:k+2]))
			}
		}
		i = j
	}
	return terms
}

// IsCJK reports whether r is written without spaces between words: Han
// (including the compatibility and extension blocks), Hiragana, Katakana
// (and its phonetic extensions) or Hangul.
func IsCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

func hasCJK(s string) bool {
	for _, r := range s {
		if IsCJK(r) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Fold is the comparison form of text every text rule shares: NFKC, then Unicode
// case folding. ASCII text is only lowered (the same result, without the
// normaliser's allocations).
func Fold(text string) string {
	if isASCII(text) {
		return strings.ToLower(text)
	}
	return cases.Fold().String(norm.NFKC.String(text))
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
