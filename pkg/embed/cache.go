package embed

import (
	"context"
	"fmt"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cached is an Embedder that keeps the vectors of the texts it embedded last,
// at most Size of them (the least recently used go first), keyed by the model
// (the inner Embedder's Name) and the text. Reads wrap their query embedder in
// it: an agent asks the same questions again, and a remote model's round trip
// is the largest part of such a read. Safe for concurrent use.
type Cached struct {
	inner Embedder
	model string
	cache *lru.Cache[cacheKey, []float32]
}

type cacheKey struct{ model, text string }

// NewCached wraps e with a cache of size texts (size > 0).
func NewCached(e Embedder, size int) (*Cached, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w: cache size %d, want > 0", ErrInvalidConfig, size)
	}
	cache, err := lru.New[cacheKey, []float32](size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Cached{inner: e, model: e.Name(), cache: cache}, nil
}

// Embed implements Embedder: the texts not in the cache are embedded with one
// call of the inner Embedder and kept. Every vector returned is the caller's own
// copy.
func (c *Cached) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var (
		missing []string
		at      []int // at[j] is the index in texts of missing[j]
	)
	for i, t := range texts {
		if v, ok := c.cache.Get(cacheKey{c.model, t}); ok {
			out[i] = slices.Clone(v)
			continue
		}
		missing = append(missing, t)
		at = append(at, i)
	}
	if len(missing) == 0 {
		return out, nil
	}
	vecs, err := c.inner.Embed(ctx, missing)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(missing) {
		return nil, fmt.Errorf("%w: %s returned %d vectors for %d texts", ErrRejected, c.model, len(vecs), len(missing))
	}
	for j, v := range vecs {
		c.cache.Add(cacheKey{c.model, missing[j]}, slices.Clone(v))
		out[at[j]] = v
	}
	return out, nil
}

// Len is how many texts the cache holds.
func (c *Cached) Len() int { return c.cache.Len() }

// Dimensions implements Embedder.
func (c *Cached) Dimensions() int { return c.inner.Dimensions() }

// Name implements Embedder: the inner Embedder's, whose vectors these are.
func (c *Cached) Name() string { return c.model }
