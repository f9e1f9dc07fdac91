package llmtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// The fake model answers every step of the real LLM processors with a reply they
// accept (not their rule-based fallback), counts the calls per step, and injects
// failures when switched to.
func TestModelAnswersEveryStep(t *testing.T) {
	m := llmtest.NewModel(t)
	client, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "fake", MaxRetries: -1, Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lc := processor.LLMConfig{Client: client}

	decider, err := processor.NewLLMDecider(lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := decider.Decide(ctx, records.Observation{Role: "user", Text: "Remember: my cat is called Miso", TS: time.Now(), ChatID: "c1"})
	if err != nil || !ep.Write || !strings.Contains(ep.Thing, "Miso") {
		t.Fatalf("decide: %+v, %v", ep, err)
	}

	entries, err := extract.NewLLM(client, nil).Extract(ctx, []extract.Message{
		{Role: "user", Text: "Remember: sales.csv has columns date, product, qty"},
		{Role: "assistant", Text: "Noted."},
	})
	if err != nil || len(entries) != 1 || entries[0].Category != "file_pattern" {
		t.Fatalf("extract: %+v, %v", entries, err)
	}

	a := vectorstore.Record{ID: vectorstore.DeterministicID("a"), Text: "I live in Lisbon", TS: time.Now(), ChatID: "c1", Who: "user"}
	b := vectorstore.Record{ID: vectorstore.DeterministicID("b"), Text: "I moved to Lisbon", TS: time.Now(), ChatID: "c2", Who: "user"}
	semantic, err := processor.NewLLMSemanticWriter(lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if facts, err := semantic.Facts(ctx, []vectorstore.Record{a}, nil); err != nil || len(facts) != 1 {
		t.Fatalf("semantic: %+v, %v", facts, err)
	}
	merger, err := processor.NewLLMMerger(lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rw, err := merger.Merge(ctx, a, b); err != nil || !strings.Contains(rw.Text, "moved") || !strings.Contains(rw.Text, "live") || rw.ProcessedBy != "" {
		t.Fatalf("merge: %+v, %v", rw, err)
	}
	separator, err := processor.NewLLMSeparator(lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ta, tb, err := separator.Separate(ctx, a, b); err != nil || ta.Text == tb.Text || ta.ProcessedBy != "" {
		t.Fatalf("separate: %+v %+v, %v", ta, tb, err)
	}
	reconsolidator, err := processor.NewLLMReconsolidator(lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rw, err := reconsolidator.Reconsolidate(ctx, a, "asked where they live"); err != nil || rw != (processor.Rewrite{Text: a.Text}) {
		t.Fatalf("reconsolidate: %+v, %v", rw, err)
	}
	for _, step := range []string{llmtest.StepDecide, llmtest.StepExtract, llmtest.StepSemantic, llmtest.StepMerge, llmtest.StepSeparate, llmtest.StepReconsolidate} {
		if n := m.Calls(step); n != 1 {
			t.Errorf("%s: %d calls, want 1", step, n)
		}
	}

	emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: m.URL(), Model: "fake-embedding", Dimensions: 32, Retries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := emb.Embed(ctx, []string{"sales columns", "sales columns", "my cat"})
	if err != nil || len(vecs) != 3 || len(vecs[0]) != 32 || embed.Cosine(vecs[0], vecs[1]) < 0.99 || embed.Cosine(vecs[0], vecs[2]) > 0.5 {
		t.Fatalf("embeddings: %d vectors, %v", len(vecs), err)
	}

	m.SetStatus(http.StatusServiceUnavailable)
	if _, err := decider.Decide(ctx, records.Observation{Role: "user", Text: "Remember: x y z", TS: time.Now()}); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("decide with the model failing: %v, want ErrUnavailable", err)
	}
	m.SetStatus(0)
	m.SetDown(true)
	if _, err := emb.Embed(ctx, []string{"x"}); err == nil {
		t.Fatal("embeddings from a model that is down")
	}
	m.SetDown(false)
	m.SetInvalidJSON(true)
	if err := client.CompleteJSON(ctx, "You decide whether one message", "x", []byte(`{"type":"object"}`), new(map[string]any)); !errors.Is(err, llm.ErrBadReply) {
		t.Fatalf("invalid JSON: %v, want ErrBadReply", err)
	}
}
