package replay

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

var errLost = errors.New("connection lost")

// deleteFails is the embedded store with the delete of one record failing, as
// a store that dropped the connection in the middle of a call does.
type deleteFails struct {
	vectorstore.Store
	id string
}

func (d deleteFails) Delete(ctx context.Context, tenant, user string, ids ...string) (int, error) {
	if slices.Contains(ids, d.id) {
		return 0, errLost
	}
	return d.Store.Delete(ctx, tenant, user, ids...)
}

func vectorStore(t *testing.T, texts map[string]string) vectorstore.Store {
	t.Helper()
	s, err := embedded.New(embedded.Config{Path: embedded.MemoryPath, Dimensions: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for id, text := range texts {
		rec := vectorstore.Record{ID: id, Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Semantic, Text: text, Vector: []float32{1, 0}, TS: time.Unix(0, 0)}
		if err := s.Upsert(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func texts(t *testing.T, s vectorstore.Store, f vectorstore.Filter) map[string]string {
	t.Helper()
	recs, err := scrollAll(context.Background(), s, f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range recs {
		out[r.ID] = r.Text
	}
	return out
}

// A rebuild swaps the user's memories in one step: a failure midway (here the
// delete of the memories the rebuild no longer has) puts the old ones back, and
// the swap that succeeds leaves exactly the rebuilt ones.
func TestReplaceVectorsSwapsOrLeavesTheMemoriesAlone(t *testing.T) {
	ctx := context.Background()
	f := vectorstore.Filter{Tenant: "acme", UserID: "u1", IncludeExpired: true}
	old := map[string]string{vectorstore.DeterministicID("a"): "old a", vectorstore.DeterministicID("b"): "old b"}
	rebuilt := map[string]string{vectorstore.DeterministicID("a"): "rebuilt a", vectorstore.DeterministicID("c"): "rebuilt c"}
	from, target := vectorStore(t, rebuilt), vectorStore(t, old)

	_, err := replaceVectors(ctx, from, deleteFails{target, vectorstore.DeterministicID("b")}, f)
	if !errors.Is(err, errLost) || !strings.Contains(err.Error(), "as they were") {
		t.Fatalf("replaceVectors with deletes failing: %v; want the failure, the memories said to be as they were", err)
	}
	if got := texts(t, target, f); !maps.Equal(got, old) {
		t.Fatalf("after a failed swap the memories are %v; want them as they were: %v", got, old)
	}
	if n, err := replaceVectors(ctx, from, target, f); err != nil || n != len(rebuilt) {
		t.Fatalf("replaceVectors = %d, %v", n, err)
	}
	if got := texts(t, target, f); !maps.Equal(got, rebuilt) {
		t.Fatalf("after the swap the memories are %v; want the rebuilt ones %v", got, rebuilt)
	}
}
