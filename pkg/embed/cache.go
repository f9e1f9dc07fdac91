package embed

import (
	"context"
	"fmt"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// Cached is an Embedder that keeps the vectors of the texts it embedded last,
// at most Size of them (the least recently used go first), keyed by the model
// (the inner Embedder's Name) and the text. Reads wrap their query embedder in
// it: an agent asks the same questions again, and a remote model's round trip
// is the largest part of such a read. Safe for concurrent use.
type Cached struct {
	inner  Embedder
	model  string
	cache  *lru.Cache[cacheKey, []float32]
	flight singleflight.Group // one text missed by several callers at once (shared)
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
	switch len(missing) {
	case 0:
		return out, nil
	case 1:
		v, err := c.shared(ctx, missing[0])
		if err != nil {
			return nil, err
		}
		out[at[0]] = v
		return out, nil
	}
	vecs, err := c.embedMissing(ctx, missing)
	if err != nil {
		return nil, err
	}
	for j, v := range vecs {
		out[at[j]] = v
	}
	return out, nil
}

// embedMissing embeds texts with one call of the inner Embedder and keeps
// copies of their vectors.
func (c *Cached) embedMissing(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := c.inner.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("%w: %s returned %d vectors for %d texts", ErrRejected, c.model, len(vecs), len(texts))
	}
	for j, v := range vecs {
		c.cache.Add(cacheKey{c.model, texts[j]}, slices.Clone(v))
	}
	return vecs, nil
}

// shared embeds one text once for all the callers missing it at the same time:
// a context request recalls its user, agent and tenant scopes side by side, and
// each would otherwise ask the model for the same new query. The call runs under
// the first caller's deadline but not its cancellation, so that a caller going
// away fails no other; each caller waits as long as its own ctx allows.
func (c *Cached) shared(ctx context.Context, text string) ([]float32, error) {
	ch := c.flight.DoChan(text, func() (any, error) {
		cctx := context.WithoutCancel(ctx)
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			cctx, cancel = context.WithDeadline(cctx, d)
			defer cancel()
		}
		vecs, err := c.embedMissing(cctx, []string{text})
		if err != nil {
			return nil, err
		}
		return vecs[0], nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return slices.Clone(r.Val.([]float32)), nil // each caller's own copy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Len is how many texts the cache holds.
func (c *Cached) Len() int { return c.cache.Len() }

// Dimensions implements Embedder.
func (c *Cached) Dimensions() int { return c.inner.Dimensions() }

// Name implements Embedder: the inner Embedder's, whose vectors these are.
func (c *Cached) Name() string { return c.model }
