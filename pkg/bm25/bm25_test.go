package bm25

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"only separators", " ,.;-- \n\t", nil},
		{"lowercase and punctuation", "Sales FILES: columns date, product, qty.", []string{"sale", "file", "column", "date", "product", "qti"}},
		{"stopwords dropped", "the columns of the table", []string{"column", "tabl"}},
		{"single letters dropped, digits kept", "a b 5 x 42", []string{"5", "42"}},
		{"possessive", "the user's chart", []string{"user", "chart"}},
		{"curly possessive", "the user’s chart", []string{"user", "chart"}},
		{"plurals", "rows bugs files", []string{"row", "bug", "file"}},
		{"ss us is endings", "class status analysis process", []string{"class", "status", "analysi", "process"}},
		{"inflections share a stem", "researched researching research painting paints", []string{"research", "research", "research", "paint", "paint"}},
		{"underscore splits", "file_pattern", []string{"file", "pattern"}},
		{"unicode letters, case folded", "Größe café über 東京", []string{"grösse", "café", "über", "東京"}},
		{"decomposed accent composed, one unstemmed word", "cafe\u0301s", []string{"caf\u00e9s"}},
		{"numbers and mixed tokens unstemmed", "2023 covid19", []string{"2023", "covid19"}},
		{"duplicates kept in order", "qty qty date", []string{"qti", "qti", "date"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tokenize(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParamsValidate(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, p := range []Params{{K1: -1, B: 0.5}, {K1: math.NaN(), B: 0.5}, {K1: math.Inf(1), B: 0.5}, {K1: 1, B: 1.5}, {K1: 1, B: -0.1}, {K1: 1, B: math.NaN()}} {
		if err := p.Validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidParams", p, err)
		}
	}
}

func TestNewIndexInvalidParamsFallBackToDefaults(t *testing.T) {
	docs := [][]string{{"sale", "column"}, {"chart", "style", "sale"}, {"error"}}
	q := []string{"sale"}
	want := NewIndex(docs, DefaultParams())
	for _, p := range []Params{{}, {K1: -3, B: 2}} {
		got := NewIndex(docs, p)
		for d := range docs {
			if got.Score(q, d) != want.Score(q, d) {
				t.Errorf("params %+v: doc %d scored %v, defaults give %v", p, d, got.Score(q, d), want.Score(q, d))
			}
		}
	}
}

func TestSearchRanksByRelevance(t *testing.T) {
	docs := [][]string{
		Tokenize("User prefers bar charts with a dark theme"),
		Tokenize("Sales files: columns date, product, qty, unit_price, amount"),
		Tokenize("Error: KeyError 'amount' fixed by renaming the column"),
		Tokenize("Inventory files have columns sku and stock"),
	}
	ix := NewIndex(docs, DefaultParams())
	got := ix.Search(Tokenize("columns of sales files"), 10)
	if len(got) != 3 {
		t.Fatalf("Search returned %d results (%v), want 3 (docs 1, 3, 2)", len(got), got)
	}
	if got[0].Doc != 1 || got[1].Doc != 3 || got[2].Doc != 2 {
		t.Errorf("ranking = %v, want docs 1, 3, 2", got)
	}
	if ix.Len() != 4 {
		t.Errorf("Len = %d, want 4", ix.Len())
	}
}

func TestSearchEdges(t *testing.T) {
	ix := NewIndex([][]string{{"a1"}, {"a1"}, {}}, DefaultParams())
	if got := ix.Search([]string{"a1"}, 0); got != nil {
		t.Errorf("limit 0 gave %v, want nil", got)
	}
	if got := ix.Search(nil, 5); len(got) != 0 {
		t.Errorf("empty query gave %v, want none", got)
	}
	got := ix.Search([]string{"a1", "a1"}, 5)
	if len(got) != 2 || got[0].Doc != 0 || got[1].Doc != 1 || got[0].Score != got[1].Score {
		t.Errorf("equal scores: got %v, want docs 0 then 1 with equal scores", got)
	}
	if s := ix.Score([]string{"a1"}, 7); s != 0 {
		t.Errorf("out-of-range doc scored %v", s)
	}
	if s, once := ix.Score([]string{"a1", "a1"}, 0), ix.Score([]string{"a1"}, 0); s != once {
		t.Errorf("repeated query term changed the score: %v vs %v", s, once)
	}
	if idf := ix.IDF("missing"); idf != 0 {
		t.Errorf("IDF of an absent term = %v, want 0", idf)
	}
	empty := NewIndex(nil, DefaultParams())
	if got := empty.Search([]string{"x1"}, 3); len(got) != 0 {
		t.Errorf("empty index gave %v", got)
	}
}

var vocab = []string{"sale", "column", "file", "chart", "error", "qty", "date", "theme", "row", "csv"}

func genDocs(t *rapid.T) [][]string {
	return rapid.SliceOfN(rapid.SliceOfN(rapid.SampledFrom(vocab), 0, 12), 1, 8).Draw(t, "docs")
}

// genParams draws valid params; never the zero Params, which NewIndex reads as
// DefaultParams.
func genParams(t *rapid.T) Params {
	p := Params{K1: rapid.Float64Range(0, 3).Draw(t, "k1"), B: rapid.Float64Range(0, 1).Draw(t, "b")}
	if p == (Params{}) {
		return DefaultParams()
	}
	return p
}

func TestPropertyScoresNonNegative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs := genDocs(t)
		ix := NewIndex(docs, genParams(t))
		q := rapid.SliceOfN(rapid.SampledFrom(vocab), 0, 5).Draw(t, "query")
		for d := range docs {
			if s := ix.Score(q, d); s < 0 || math.IsNaN(s) {
				t.Fatalf("doc %d scored %v", d, s)
			}
		}
	})
}

func TestPropertyDocWithoutQueryTermsScoresZero(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs := genDocs(t)
		ix := NewIndex(docs, genParams(t))
		q := rapid.SliceOfN(rapid.SampledFrom(vocab), 1, 5).Draw(t, "query")
		for d, doc := range docs {
			shared := slices.ContainsFunc(doc, func(tok string) bool { return slices.Contains(q, tok) })
			if s := ix.Score(q, d); !shared && s != 0 {
				t.Fatalf("doc %d %q shares no term with %q but scored %v", d, doc, q, s)
			}
		}
	})
}

func TestPropertySearchSortedAndBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs := genDocs(t)
		ix := NewIndex(docs, genParams(t))
		q := rapid.SliceOfN(rapid.SampledFrom(vocab), 0, 5).Draw(t, "query")
		limit := rapid.IntRange(0, 10).Draw(t, "limit")
		got := ix.Search(q, limit)
		if len(got) > limit {
			t.Fatalf("%d results for limit %d", len(got), limit)
		}
		for i, r := range got {
			if r.Score <= 0 || r.Score != ix.Score(q, r.Doc) {
				t.Fatalf("result %v: score must be > 0 and equal Score() = %v", r, ix.Score(q, r.Doc))
			}
			if i > 0 {
				prev := got[i-1]
				if prev.Score < r.Score || (prev.Score == r.Score && prev.Doc >= r.Doc) {
					t.Fatalf("results out of order: %v", got)
				}
			}
		}
		// Every positive-scoring doc left out must rank below the last one returned.
		returned := map[int]bool{}
		for _, r := range got {
			returned[r.Doc] = true
		}
		positive := 0
		for d := range docs {
			s := ix.Score(q, d)
			if s <= 0 {
				continue
			}
			positive++
			if !returned[d] && len(got) > 0 {
				last := got[len(got)-1]
				if s > last.Score || (s == last.Score && d < last.Doc) {
					t.Fatalf("doc %d (score %v) left out but outranks last result %v", d, s, last)
				}
			}
		}
		if want := min(limit, positive); len(got) != want {
			t.Fatalf("%d results, want min(limit %d, positive docs %d)", len(got), limit, positive)
		}
	})
}

func TestPropertyAddingQueryTermOccurrenceNeverLowersScore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs := genDocs(t)
		p := genParams(t)
		q := rapid.SliceOfN(rapid.SampledFrom(vocab), 1, 4).Draw(t, "query")
		d := rapid.IntRange(0, len(docs)-1).Draw(t, "doc")
		// A token outside the vocabulary guarantees something to replace.
		docs[d] = append(docs[d], "filler")
		var free []int // positions holding a non-query token, replaceable without changing length
		for i, tok := range docs[d] {
			if !slices.Contains(q, tok) {
				free = append(free, i)
			}
		}
		before := NewIndex(docs, p).Score(q, d)
		changed := slices.Clone(docs)
		changed[d] = slices.Clone(docs[d])
		changed[d][rapid.SampledFrom(free).Draw(t, "pos")] = rapid.SampledFrom(q).Draw(t, "term")
		if after := NewIndex(changed, p).Score(q, d); after < before {
			t.Fatalf("score fell from %v to %v after adding a query term: %q → %q", before, after, docs[d], changed[d])
		}
	})
}

// refScore is BM25 written straight from its definition, with no index: for
// each distinct query term, first seen first, its IDF times the saturated,
// length-normalised count of the term in the document.
func refScore(docs [][]string, p Params, query []string, d int) float64 {
	total := 0
	for _, doc := range docs {
		total += len(doc)
	}
	norm := 1.0
	if total > 0 {
		avg := float64(total) / float64(len(docs))
		norm = 1 - p.B + p.B*float64(len(docs[d]))/avg
	}
	score := 0.0
	var seen []string
	for _, term := range query {
		if slices.Contains(seen, term) {
			continue
		}
		seen = append(seen, term)
		n, tf := 0, 0
		for i, doc := range docs {
			c := 0
			for _, tok := range doc {
				if tok == term {
					c++
				}
			}
			if c > 0 {
				n++
			}
			if i == d {
				tf = c
			}
		}
		if tf == 0 {
			continue
		}
		idf := math.Log(1 + (float64(len(docs))-float64(n)+0.5)/(float64(n)+0.5))
		f := float64(tf)
		score += float64(idf * (f * (p.K1 + 1) / (f + p.K1*norm)))
	}
	return score
}

// Property: Score, Scores and Search give bit for bit the reference scores, and
// Search is the reference ranking (positive scores, highest first, lower doc
// first on ties, cut at limit).
func TestPropertyMatchesReferenceScorer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs := genDocs(t)
		p := genParams(t)
		ix := NewIndex(docs, p)
		q := rapid.SliceOfN(rapid.SampledFrom(append(vocab, "absent")), 0, 6).Draw(t, "query")
		limit := rapid.IntRange(1, 10).Draw(t, "limit")
		var want []Result
		scores := ix.Scores(q, make([]float64, 3)) // a reused buffer of the wrong length
		if len(scores) != len(docs) {
			t.Fatalf("Scores gave %d scores for %d docs", len(scores), len(docs))
		}
		for d := range docs {
			ref := refScore(docs, p, q, d)
			if got := ix.Score(q, d); got != ref {
				t.Fatalf("Score(%q, %d) = %v, reference %v", q, d, got, ref)
			}
			if scores[d] != ref {
				t.Fatalf("Scores(%q)[%d] = %v, reference %v", q, d, scores[d], ref)
			}
			if ref > 0 {
				want = append(want, Result{Doc: d, Score: ref})
			}
		}
		sort.SliceStable(want, func(i, j int) bool { return want[i].Score > want[j].Score })
		want = want[:min(limit, len(want))]
		if got := ix.Search(q, limit); !slices.Equal(got, want) {
			t.Fatalf("Search(%q, %d) = %v, reference %v", q, limit, got, want)
		}
	})
}
