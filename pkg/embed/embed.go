// Package embed turns text into vectors for the vector store.
//
// Two dense embedders share the Embedder interface here (a third, the USE-lite
// sentence encoder, is in pkg/embed/uselite):
//
//   - Local is a deterministic, offline, lexical embedder (signed feature hashing of
//     words, word bigrams and character trigrams). It needs no network and no model
//     weights, so the all-in-one mode and CI work anywhere, and the same text gives
//     the same vector in every process and on every machine (FNV hashing, no seeds).
//   - OpenAI calls any OpenAI-compatible /v1/embeddings endpoint through go-openai,
//     with batching, dimension checks and retries (1 s, 2 s, 4 s) on transient errors.
//
// Sparse builds the sparse (BM25-style) side of hybrid search; Cosine compares two
// dense vectors.
package embed

import (
	"context"
	"errors"
	"math"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrInvalidConfig reports a configuration that cannot work.
	ErrInvalidConfig = errors.New("embed: invalid config")
	// ErrDimension reports a vector whose length is not the configured dimension count.
	ErrDimension = errors.New("embed: dimension mismatch")
	// ErrUnavailable reports an endpoint that could not be reached or kept failing
	// with transient errors after all retries.
	ErrUnavailable = errors.New("embed: endpoint unavailable")
	// ErrRejected reports an endpoint that refused the request (a 4xx other than 429)
	// or answered with something that is not a valid embeddings response.
	ErrRejected = errors.New("embed: request rejected")
)

// Embedder turns texts into dense vectors of Dimensions() floats.
type Embedder interface {
	// Embed returns one vector per text, in order. An empty slice gives an empty result.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the length of every vector Embed returns.
	Dimensions() int
	// Name identifies the model (and its configuration where it changes the vectors),
	// so that stores can refuse to mix vectors from different embedders.
	Name() string
}

// Cosine returns the cosine similarity of a and b in [-1, 1]. It is 0 when either
// vector is all zeros or when the lengths differ (such vectors are not comparable;
// returning 0 keeps callers that threshold on similarity from acting on them).
func Cosine(a, b []float32) float32 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	c := dot / (math.Sqrt(na) * math.Sqrt(nb))
	// Rounding can push identical vectors a hair past 1.
	return float32(max(-1, min(1, c)))
}

// Normalize scales v to unit L2 length in place; a zero vector stays zero.
func Normalize(v []float32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return
	}
	inv := 1 / math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}
