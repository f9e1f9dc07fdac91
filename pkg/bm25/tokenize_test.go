package bm25

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

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
