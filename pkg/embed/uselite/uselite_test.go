package uselite

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/embed"
)

// reference is one case of testdata/tokens.json (IDs) or vectors.json (Vector).
type reference struct {
	Text   string    `json:"text"`
	IDs    []int32   `json:"ids"`
	Vector []float32 `json:"vector"`
}

func readReferences(t *testing.T, name string) []reference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v []reference
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// TestTokenizerMatchesReference compares ids with the JavaScript tokenizer's
// (testdata/tokens.json, made by testdata/gen.cjs).
func TestTokenizerMatchesReference(t *testing.T) {
	enc := encoder(t)
	cases := readReferences(t, "tokens.json")
	if len(cases) < 30 {
		t.Fatalf("tokens.json has %d cases, want at least 30", len(cases))
	}
	for _, c := range cases {
		got := enc.tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
			t.Errorf("Encode(%q) = %v, want %v", c.Text, got, c.IDs)
		}
	}
}

// TestEmbedMatchesReference compares vectors with the JavaScript model's
// (testdata/vectors.json, rounded to 6 decimals), all sentences in one call so
// that sentences of different lengths share the batched products.
func TestEmbedMatchesReference(t *testing.T) {
	enc := encoder(t)
	cases := readReferences(t, "vectors.json")
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
	}
	got, err := enc.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	worst := float32(1)
	for i, c := range cases {
		if len(got[i]) != Dimensions {
			t.Fatalf("vector %d has %d dimensions, want %d", i, len(got[i]), Dimensions)
		}
		cos := embed.Cosine(got[i], c.Vector)
		worst = min(worst, cos)
		if cos < 0.9999 {
			t.Errorf("cosine with the reference for %.40q = %.6f, want >= 0.9999", c.Text, cos)
		}
	}
	t.Logf("lowest cosine with the reference over %d texts: %.7f", len(cases), worst)
	// One at a time gives the same vectors as the batch.
	one, err := enc.Embed(context.Background(), texts[3:4])
	if err != nil {
		t.Fatal(err)
	}
	if cos := embed.Cosine(one[0], got[3]); cos < 0.99999 {
		t.Errorf("cosine of a text embedded alone and in a batch = %.6f, want ~1", cos)
	}
}

func TestEmbedEdgeCases(t *testing.T) {
	enc := encoder(t)
	vs, err := enc.Embed(context.Background(), []string{"", "", strings.Repeat("long text ", 5000)})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-4 {
			t.Errorf("vector %d has squared norm %f, want 1", i, n)
		}
	}
	if !slices.Equal(vs[0], vs[1]) {
		t.Error("the empty string gives different vectors in one batch")
	}
	if got := len(enc.Tokens(strings.Repeat("long text ", 5000))); got != 128 {
		t.Errorf("a long text has %d tokens, want the model's 128", got)
	}
	none, err := enc.Embed(context.Background(), nil)
	if err != nil || len(none) != 0 {
		t.Errorf("Embed(nil) = %v, %v; want empty, nil", none, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := enc.Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Embed on a cancelled context: %v, want context.Canceled", err)
	}
}

func TestSimilarity(t *testing.T) {
	enc := encoder(t)
	vs, err := enc.Embed(context.Background(), []string{
		"What are Melanie's hobbies?", "Melanie likes painting and running.", "The stock market fell today.",
	})
	if err != nil {
		t.Fatal(err)
	}
	if related, unrelated := embed.Cosine(vs[0], vs[1]), embed.Cosine(vs[0], vs[2]); related <= unrelated {
		t.Errorf("cosine(hobbies question, hobbies answer) = %.3f <= cosine(question, stock market) = %.3f", related, unrelated)
	}
}
