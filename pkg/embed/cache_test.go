package embed_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

// remote is an OpenAI embedder on the fake model.
func remote(t *testing.T, m *llmtest.Model) *embed.OpenAI {
	t.Helper()
	o, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: m.URL(), Model: "fake-embedding", Dimensions: 16, BatchSize: 3, Retries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The cache changes no vector: whatever mix of new and known texts a call
// holds (repeats included), Cached gives what the embedder gives, in order, and
// the caller may change what it got without changing the cache.
func TestCachedEmbedsAsTheEmbedder(t *testing.T) {
	m := llmtest.NewModel(t)
	inner := remote(t, m)
	cached, err := embed.NewCached(inner, 8)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		texts := rapid.SliceOfN(rapid.SampledFrom([]string{"a b", "c d", "sales files", "my sister", "e", "f g h", "i", "j k", "l", "m n o", "p"}), 0, 10).Draw(t, "texts")
		got, err := cached.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := inner.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d vectors for %d texts", len(got), len(texts))
		}
		for i := range got {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("text %d %q: cached %v, embedder %v", i, texts[i], got[i], want[i])
			}
			got[i][0] = 42 // the caller's copy
		}
		if cached.Len() > 8 {
			t.Fatalf("cache holds %d texts, bound 8", cached.Len())
		}
	})
}

// A known query costs no request; the cache keeps at most its size, the least
// recently used going first.
func TestCachedReusesAndIsBounded(t *testing.T) {
	m := llmtest.NewModel(t)
	m.SetLatency(0, time.Millisecond)
	cached, err := embed.NewCached(remote(t, m), 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	embedOne := func(text string) {
		t.Helper()
		if _, err := cached.Embed(ctx, []string{text}); err != nil {
			t.Fatal(err)
		}
	}
	requests := func() int { return m.Calls(llmtest.StepEmbed) }
	embedOne("where does my sister live?")
	embedOne("where does my sister live?")
	if n := requests(); n != 1 {
		t.Fatalf("%d requests for one query asked twice, want 1", n)
	}
	embedOne("which columns do my sales files have?")
	embedOne("summarise my pricing project status") // evicts the sister question
	if n := cached.Len(); n != 2 {
		t.Fatalf("cache holds %d texts, want its bound 2", n)
	}
	embedOne("summarise my pricing project status")
	if n := requests(); n != 3 {
		t.Fatalf("%d requests, want 3: the newest query is kept", n)
	}
	embedOne("where does my sister live?")
	if n := requests(); n != 4 {
		t.Fatalf("%d requests, want 4: the least recently used query was dropped", n)
	}
	if _, err := embed.NewCached(remote(t, m), 0); err == nil {
		t.Error("a cache of 0 texts was accepted")
	}
}

// Callers missing the same text at the same time share one request to the
// model (a context request recalls its scopes side by side), each gets its own
// copy of the vector, and a caller going away fails none of the others.
func TestCachedSharesAMissInFlight(t *testing.T) {
	m := llmtest.NewModel(t)
	// Long enough that every caller below asks while the first request is out.
	m.SetLatency(0, 2*time.Second)
	cached, err := embed.NewCached(remote(t, m), 8)
	if err != nil {
		t.Fatal(err)
	}
	want, err := remote(t, m).Embed(context.Background(), []string{"where does my sister live?"})
	if err != nil {
		t.Fatal(err)
	}
	before := m.Calls(llmtest.StepEmbed)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cached.Embed(gone, []string{"where does my sister live?"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller gone before the answer got %v, want context.Canceled", err)
	}
	got := make([][][]float32, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = cached.Embed(context.Background(), []string{"where does my sister live?"}) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v (the first caller went away)", i, errs[i])
		}
		if !slices.Equal(got[i][0], want[0]) {
			t.Fatalf("caller %d got %v, want the embedder's %v", i, got[i][0], want[0])
		}
	}
	got[0][0][0] = 42
	if got[1][0][0] == 42 {
		t.Fatal("two callers share one vector")
	}
	if n := m.Calls(llmtest.StepEmbed) - before; n != 1 {
		t.Fatalf("%d requests for one text missed by four callers at once, want 1", n)
	}
}
