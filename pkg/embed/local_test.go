package embed

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func newLocal(t testing.TB) *Local {
	t.Helper()
	l, err := NewLocal(LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fataler is what embedOne needs from *testing.T and *rapid.T alike.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func embedOne(t fataler, e Embedder, text string) []float32 {
	t.Helper()
	v, err := e.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func norm(v []float32) float64 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	return math.Sqrt(n)
}

func TestLocalConfig(t *testing.T) {
	l := newLocal(t)
	if l.Dimensions() != DefaultLocalDimensions {
		t.Fatalf("default dimensions %d, want %d", l.Dimensions(), DefaultLocalDimensions)
	}
	if _, err := NewLocal(LocalConfig{Dimensions: -1}); err == nil {
		t.Fatal("negative dimensions accepted")
	}
	small, err := NewLocal(LocalConfig{Dimensions: 16})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(embedOne(t, small, "sales files")); got != 16 {
		t.Fatalf("vector length %d, want 16", got)
	}
	if small.Name() == l.Name() {
		t.Fatalf("embedders with different dimensions share the name %q", l.Name())
	}
}

func TestLocalDeterministic(t *testing.T) {
	a, b := newLocal(t), newLocal(t)
	text := "My sales files have columns date, product, qty and unit_price."
	first := embedOne(t, a, text)
	for range 5 {
		if !slices.Equal(first, embedOne(t, b, text)) {
			t.Fatal("the same text gave different vectors")
		}
	}
}

// helperEnv makes the test binary print an embedding instead of running tests, so
// TestLocalDeterministicAcrossProcesses can compare vectors from two processes (a
// seeded hash would pass the in-process test and fail this one).
const helperEnv = "AGENTMEM_EMBED_HELPER_TEXT"

func TestLocalDeterministicAcrossProcesses(t *testing.T) {
	if text, ok := os.LookupEnv(helperEnv); ok {
		_ = json.NewEncoder(os.Stdout).Encode(embedOne(t, newLocal(t), text))
		os.Exit(0)
	}
	text := "I study at Peking University"
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalDeterministicAcrossProcesses$")
	cmd.Env = append(os.Environ(), helperEnv+"="+text)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper process: %v", err)
	}
	var other []float32
	if err := json.Unmarshal(out, &other); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	if !slices.Equal(other, embedOne(t, newLocal(t), text)) {
		t.Fatal("another process embedded the same text differently")
	}
}

func TestLocalNormalised(t *testing.T) {
	l := newLocal(t)
	for _, text := range []string{"hello world", "Sales files: columns date, product, qty; about 5000 rows.", "x1"} {
		if n := norm(embedOne(t, l, text)); math.Abs(n-1) > 1e-5 {
			t.Errorf("%q: norm %v, want 1", text, n)
		}
	}
	for _, text := range []string{"", "   ", "!?.,", "the and of"} {
		if n := norm(embedOne(t, l, text)); n != 0 {
			t.Errorf("%q has no tokens but norm %v, want the zero vector", text, n)
		}
	}
}

func TestLocalSimilarTextsScoreHigher(t *testing.T) {
	l := newLocal(t)
	cases := []struct{ anchor, similar, unrelated string }{
		{"I study at Peking University", "I'm a student at Peking University", "the weather is nice"},
		{"my sales files have columns date, product, qty", "the sales file columns are date and product", "I like my charts in dark blue"},
		{"fixed the KeyError by renaming the column", "a KeyError on a renamed column", "lunch at noon tomorrow"},
	}
	for _, c := range cases {
		a, s, u := embedOne(t, l, c.anchor), embedOne(t, l, c.similar), embedOne(t, l, c.unrelated)
		sim, unrel := Cosine(a, s), Cosine(a, u)
		if sim <= unrel || sim < 0.3 {
			t.Errorf("%q: cosine with similar %q = %.3f, with unrelated %q = %.3f", c.anchor, c.similar, sim, c.unrelated, unrel)
		}
	}
}

func TestLocalCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newLocal(t).Embed(ctx, []string{"a text"}); err == nil {
		t.Fatal("cancelled context did not stop Embed")
	}
}

// Property: every vector is either unit length or all zeros, has the configured
// length, and is the same on a second call.
func TestPropertyLocalUnitOrZeroAndDeterministic(t *testing.T) {
	l := newLocal(t)
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.String().Draw(t, "text")
		v1, v2 := embedOne(t, l, text), embedOne(t, l, text)
		if len(v1) != l.Dimensions() {
			t.Fatalf("length %d, want %d", len(v1), l.Dimensions())
		}
		if !slices.Equal(v1, v2) {
			t.Fatal("not deterministic")
		}
		if n := norm(v1); n != 0 && math.Abs(n-1) > 1e-5 {
			t.Fatalf("norm %v, want 0 or 1", n)
		}
	})
}

func TestCosine(t *testing.T) {
	cases := []struct {
		name string
		a, b []float32
		want float32
	}{
		{"identical", []float32{1, 2, 3}, []float32{1, 2, 3}, 1},
		{"scaled", []float32{1, 2, 3}, []float32{2, 4, 6}, 1},
		{"opposite", []float32{1, 0}, []float32{-1, 0}, -1},
		{"orthogonal", []float32{1, 0}, []float32{0, 1}, 0},
		{"zero", []float32{0, 0}, []float32{1, 0}, 0},
		{"length mismatch", []float32{1, 0}, []float32{1, 0, 0}, 0},
		{"empty", nil, nil, 0},
	}
	for _, c := range cases {
		if got := Cosine(c.a, c.b); math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("%s: Cosine = %v, want %v", c.name, got, c.want)
		}
	}
}
