package bm25

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/kljensen/snowball/english"
	"pgregory.net/rapid"
)

// A cached stem is the stemmer's, on the first lookup and on every later one.
func TestPropertyStemCacheIsTheStemmer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.StringMatching(`[a-z]{2,14}`).Draw(t, "word")
		want := english.Stem(w, true)
		for i := range 2 {
			if got := stems.stem(w); got != want {
				t.Fatalf("lookup %d of %q = %q, want %q", i, w, got, want)
			}
		}
	})
}

// The cache never holds more than stemCacheSize words, however many it sees, and
// keeps answering correctly after it is cleared.
func TestStemCacheIsBounded(t *testing.T) {
	var c stemCache
	for i := range stemCacheSize + 100 {
		c.stem(fmt.Sprintf("word%sing", strings.Repeat("x", i%7)+fmt.Sprint(i)))
	}
	held := 0
	c.m.Range(func(_, _ any) bool { held++; return true })
	if held > stemCacheSize || int64(held) != c.n.Load() {
		t.Fatalf("cache holds %d words (counted %d), bound %d", held, c.n.Load(), stemCacheSize)
	}
	if got := c.stem("researching"); got != "research" {
		t.Fatalf("stem after a clear = %q", got)
	}
}

// Tokenizers running at once share the cache (run with -race) and each gets the
// terms it would get alone.
func TestTokenizeConcurrently(t *testing.T) {
	texts := []string{"researched researching research", "painting paints columns", "the user's files and rows"}
	want := make([][]string, len(texts))
	for i, text := range texts {
		want[i] = Tokenize(text)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(texts))
	for range 8 {
		wg.Go(func() {
			for i, text := range texts {
				if got := Tokenize(text); strings.Join(got, " ") != strings.Join(want[i], " ") {
					errs <- fmt.Sprintf("Tokenize(%q) = %q, want %q", text, got, want[i])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// BenchmarkTokenize tokenizes memory-like sentences of English words drawn with a
// Zipf distribution from the stemmer's own test vocabulary order (frequent words
// repeat, as in real text); ns/op is per 24-word sentence.
func BenchmarkTokenize(b *testing.B) {
	vocab := strings.Fields(`research paint column product quantity customer invoice
		report meeting schedule travel family garden kitchen recipe holiday weather
		running swimming reading writing painting cooking baking singing dancing
		hiking camping fishing drawing learning teaching working playing walking
		talking thinking feeling remembered visited bought finished started planned
		adopted celebrated organized volunteered supported motivated inspiring
		beautiful wonderful amazing difficult important different interesting`)
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	texts := make([]string, 256)
	for i := range texts {
		w := make([]string, 24)
		for j := range w {
			w[j] = vocab[z.Uint64()]
		}
		texts[i] = strings.Join(w, " ")
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		Tokenize(texts[i%len(texts)])
		i++
	}
}

func TestTokenizeCJKBigrams(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"销售报表", []string{"销售", "售报", "报表"}},
		{"表", []string{"表"}},
		{"sales_q1.xlsx 有这些列", []string{"sale", "q1", "xlsx", "有这", "这些", "些列"}},
		{"東京で働いています", []string{"東京", "京で", "で働", "働い", "いて", "てい", "いま", "ます"}},
		{"서울에 살아요", []string{"서울", "울에", "살아", "아요"}},
		{"ＣＳＶ Ｆｉｌｅｓ", []string{"csv", "file"}},
		{"STRASSE straße", []string{"strass", "strass"}},
	} {
		if got := Tokenize(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A query in a script finds a text in the same script that shares a word of two
// characters or more, wherever the word stands.
func TestPropertyCJKWordInTextMatchesQuery(t *testing.T) {
	han := rapid.SliceOfN(rapid.RuneFrom(nil, &unicode.RangeTable{R16: []unicode.Range16{{Lo: 0x4E00, Hi: 0x9FA5, Stride: 1}}}), 2, 4)
	rapid.Check(t, func(t *rapid.T) {
		word := string(han.Draw(t, "word"))
		before := string(han.Draw(t, "before"))
		after := string(han.Draw(t, "after"))
		text := Tokenize(before + word + after)
		for _, q := range Tokenize(word) {
			if !slices.Contains(text, q) {
				t.Fatalf("term %q of %q not among the terms of %q: %q", q, word, before+word+after, text)
			}
		}
	})
}

func TestPropertyFoldMatchesLowerOnASCII(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		f := Fold(s)
		if isASCII(s) && f != strings.ToLower(s) {
			t.Fatalf("Fold(%q) = %q, want lower case", s, f)
		}
	})
}
