package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// BenchmarkRecall measures the context-request hot path: one user's recall
// (episodic and semantic, 5 each) among 1,000 users × 100 records.
func BenchmarkRecall(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchRecall(b, memory.Config{}) })
	// The word-vector expansion and re-ranking (vector.semantic_expansion and
	// vector.semantic_rerank).
	b.Run("semantic", func(b *testing.B) {
		benchRecall(b, memory.Config{Expansion: memory.ExpansionConfig{Enabled: true}, Rerank: memory.RerankConfig{Enabled: true}})
	})
}

func benchRecall(b *testing.B, cfg memory.Config) {
	const users, perUser = 1000, 100
	f := newFixture(b, cfg)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("tea coffee berlin lisbon cats dogs hiking running sales columns report sister brother " +
		"cello piano morning evening budget project deadline invoice garden kitchen travel kyoto marathon book movie")
	batch := make([]vectorstore.Record, 0, perUser)
	for u := range users {
		user := fmt.Sprintf("u%d", u)
		texts := make([]string, perUser)
		for i := range texts {
			ws := make([]string, 6)
			for j := range ws {
				ws[j] = words[rng.IntN(len(words))]
			}
			texts[i] = "I like " + strings.Join(ws, " ")
		}
		vecs, err := f.emb.Embed(ctx, texts)
		if err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
		for i, text := range texts {
			typ := vectorstore.Episodic
			if i%2 == 1 {
				typ = vectorstore.Semantic
			}
			batch = append(batch, vectorstore.Record{
				ID: vectorstore.DeterministicID("bench", user, fmt.Sprint(i)), Tenant: "acme", UserID: user, MemoryType: typ,
				Text: text, Vector: vecs[i], TS: t0.Add(-time.Duration(rng.IntN(1000)) * time.Hour), HitCount: rng.IntN(20),
				Metadata: map[string]any{"thing": text, "updates": []any{}},
			})
		}
		if err := f.store.Upsert(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	// Warm the queried partition, as a serving retriever would have.
	if _, err := f.svc.Recall(ctx, "acme", "u500", "tea morning", nil, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ranked, err := f.svc.Recall(ctx, "acme", "u500", "tea in the morning", nil, nil)
		if err != nil || len(ranked) != 10 {
			b.Fatalf("recall: %d results, %v", len(ranked), err)
		}
	}
}

// BenchmarkSearch is the C2 search on the same shape, without the setup cost of
// the big store: 100 records of one user.
func BenchmarkSearch(b *testing.B) {
	f := newFixture(b, memory.Config{})
	ctx := context.Background()
	for i := range 100 {
		typ := events.MemoryEpisodic
		if i%2 == 1 {
			typ = events.MemorySemantic
		}
		if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: fmt.Sprintf("I like tea number %d", i), MemoryType: typ}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.svc.Search(ctx, "acme", events.SearchRequest{UserID: "u1", Query: "tea"}); err != nil {
			b.Fatal(err)
		}
	}
}
