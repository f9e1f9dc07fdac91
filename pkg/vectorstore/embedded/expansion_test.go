package embedded_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// TestSparseExpansionAndTermDocs: an expansion term finds a record sharing no
// word with the text, scoring Weight × what the same term scores as text; a
// term the text has keeps weight 1; TermDocs counts the partition's records per
// term, and no other partition's.
func TestSparseExpansionAndTermDocs(t *testing.T) {
	s := openEmbedded(t, filepath.Join(t.TempDir(), "v.db"), 2)
	ctx := context.Background()
	recs := []vectorstore.Record{
		{ID: vectorstore.DeterministicID("1"), Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Episodic, Text: "I practise guitar daily", Vector: []float32{1, 0}},
		{ID: vectorstore.DeterministicID("2"), Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Episodic, Text: "which instruments to buy", Vector: []float32{1, 0}},
		{ID: vectorstore.DeterministicID("3"), Tenant: "acme", UserID: "u2", MemoryType: vectorstore.Episodic, Text: "guitar guitar", Vector: []float32{1, 0}},
	}
	if err := s.Upsert(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	search := func(text string, exp ...vectorstore.WeightedTerm) map[string]float64 {
		t.Helper()
		hits, err := s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Text: text, Expansion: exp, Mode: vectorstore.Sparse, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, h := range hits {
			out[h.Record.ID] = h.Score
		}
		return out
	}
	plain := search("guitar")
	expanded := search("instruments", vectorstore.WeightedTerm{Term: "guitar", Weight: 0.25})
	if len(plain) != 1 || len(expanded) != 2 {
		t.Fatalf("hits %v and %v, want the guitar record, then both", plain, expanded)
	}
	if got, want := expanded[recs[0].ID], 0.25*plain[recs[0].ID]; math.Abs(got-want) > 1e-12 {
		t.Errorf("expanded score %v, want 0.25 × %v", got, plain[recs[0].ID])
	}
	if own := search("guitar", vectorstore.WeightedTerm{Term: "guitar", Weight: 0.25}); own[recs[0].ID] != plain[recs[0].ID] {
		t.Errorf("a text term given as expansion too scored %v, want its own %v", own[recs[0].ID], plain[recs[0].ID])
	}
	docs, err := s.TermDocs(ctx, "acme", "u1", []string{"guitar", "instrument", "piano"})
	if err != nil || !slices.Equal(docs, []int{1, 1, 0}) {
		t.Errorf("TermDocs = %v, %v; want [1 1 0]", docs, err)
	}
	if docs, err := s.TermDocs(ctx, "acme", "nobody", []string{"guitar"}); err != nil || !slices.Equal(docs, []int{0}) {
		t.Errorf("TermDocs of an empty partition = %v, %v; want [0]", docs, err)
	}
	_, err = s.Search(ctx, vectorstore.Query{Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Text: "x", Expansion: []vectorstore.WeightedTerm{{Term: "guitar", Weight: 2}}, Mode: vectorstore.Sparse, Limit: 1})
	if !errors.Is(err, vectorstore.ErrInvalidQuery) {
		t.Errorf("weight 2: err = %v, want ErrInvalidQuery", err)
	}
	if _, err := s.TermDocs(ctx, "acme", "bad user!", []string{"guitar"}); !errors.Is(err, vectorstore.ErrInvalidFilter) {
		t.Errorf("bad user: err = %v, want ErrInvalidFilter", err)
	}
}
