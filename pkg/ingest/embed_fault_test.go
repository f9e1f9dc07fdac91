package ingest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/ingest"
)

// brokenEmbedder is the local embedder answering with one vector too few, or
// failing with err when it is set.
type brokenEmbedder struct {
	embed.Embedder
	err error
}

func (b brokenEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if b.err != nil {
		return nil, b.err
	}
	vecs, err := b.Embedder.Embed(ctx, texts)
	return vecs[:len(vecs)-1], err
}

// An embedder that fails, or answers with fewer vectors than texts, fails the
// observations whose episodes it was to embed, saying so, and stores nothing;
// an observation that writes no episode (the greeting) succeeds.
func TestEmbedderFaultFailsTheEpisodesObservations(t *testing.T) {
	down := errors.New("embedder down")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"fails", down, "embedder down"},
		{"a vector short", nil, "1 vectors for 2 texts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w := newIngest(t, ingest.Config{}, func(d *ingest.Deps) { d.Embedder = brokenEmbedder{Embedder: d.Embedder, err: tc.err} })
			batch := []events.Envelope{
				observation("u1", "hi!"),
				observation("u1", "Remember: my team meets on Tuesdays"),
				observation("u1", "Remember: my invoices live in the finance share"),
			}
			errs := w.HandleBatch(context.Background(), batch)
			if errs[0] != nil {
				t.Fatalf("the greeting failed: %v", errs[0])
			}
			for _, err := range errs[1:] {
				if err == nil || !strings.Contains(err.Error(), "ingest: embed 2 episodes: "+tc.want) || tc.err != nil && !errors.Is(err, tc.err) {
					t.Fatalf("results %v; want both episodes' observations failed with %q", errs, tc.want)
				}
			}
			if eps := r.episodes(t, "u1"); len(eps) != 0 {
				t.Fatalf("stored %v, want nothing", ids(eps))
			}
		})
	}
}
