package memory_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/memory"
)

// A read's query is embedded once while the cache holds it: asked again, the
// recall makes no embeddings request and ranks as before; the cache keeps
// QueryCacheSize queries, so one pushed out is embedded again.
func TestRecallReusesCachedQueryEmbedding(t *testing.T) {
	m := llmtest.NewModel(t)
	emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: m.URL(), Model: "fake-embedding", Dimensions: 64, Retries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, memory.Config{QueryCacheSize: 2}, emb)
	ctx := context.Background()
	for _, text := range []string{"My sister lives in Porto.", "I prefer bar charts for the sales report."} {
		if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	recall := func(query string) []string {
		t.Helper()
		r, err := f.svc.RecallStatus(ctx, "acme", "u1", query, nil, nil)
		if err != nil || len(r.Degraded) > 0 {
			t.Fatalf("recall %q: %v, degraded %v", query, err, r.Degraded)
		}
		var out []string
		for _, x := range r.Ranked {
			out = append(out, x.Record.ID)
		}
		return out
	}
	requests := func() int { return m.Calls(llmtest.StepEmbed) }
	first := recall("where does my sister live?")
	before := requests()
	if again := recall("where does my sister live?"); !slices.Equal(again, first) || len(first) == 0 {
		t.Fatalf("asked again: %v, first %v", again, first)
	}
	if n := requests() - before; n != 0 {
		t.Fatalf("%d embeddings requests for a query asked before, want 0", n)
	}
	recall("which charts do I prefer?")
	recall("what is my sales report?") // the cache holds 2: the sister question goes
	before = requests()
	recall("where does my sister live?")
	if n := requests() - before; n != 1 {
		t.Fatalf("%d embeddings requests for a query pushed out of the cache, want 1", n)
	}
}
