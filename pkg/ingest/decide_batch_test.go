package ingest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/processor"
)

// oneByOne hides DecideBatch, so ingest decides each observation alone.
type oneByOne struct{ processor.WriteDecider }

// With a model's decider, a batch's decisions go out several per request (one
// request per DecideBatchSize messages) and ingest stores what it stores when
// it asks each message alone: the same episodes, texts and ids.
func TestBatchedModelDecisionsStoreWhatOneByOneDoes(t *testing.T) {
	m := llmtest.NewModel(t)
	m.SetLatency(5*time.Millisecond, 0) // small: only the counts are checked
	client, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "m", MaxRetries: -1, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const size = 4
	model, err := processor.NewLLMDecider(processor.LLMConfig{Client: client, DecideBatchSize: size}, nil)
	if err != nil {
		t.Fatal(err)
	}
	decider := processor.NewFallbackDecider(model, nil)
	texts := []string{"hi!", "Remember: my team meets on Tuesdays", "thanks", "I moved to Porto in March", "what is 2+2?",
		"My sister Ana plays the cello", "ok", "I prefer bar charts", "Remember my fiscal year starts in April", "   "}
	batch := make([]events.Envelope, len(texts))
	for i, text := range texts {
		batch[i] = observation("u1", text)
	}
	stored := func(decider processor.WriteDecider) []string {
		r, w := newIngest(t, ingest.Config{DecideConcurrency: 8}, func(d *ingest.Deps) { d.Decider = decider })
		for i, err := range w.HandleBatch(context.Background(), batch) {
			if err != nil {
				t.Fatalf("observation %d: %v", i, err)
			}
		}
		var out []string
		for _, ep := range r.episodes(t, "u1") {
			out = append(out, ep.ID+" "+ep.Text)
		}
		slices.Sort(out)
		return out
	}
	batched := stored(decider)
	// Nine messages (the blank one is not asked): 4 + 4 + 1, the last alone.
	singles := m.Calls(llmtest.StepDecide)
	if calls := m.Calls(llmtest.StepDecideBatch); calls != 2 || singles != 1 {
		t.Fatalf("%d batched and %d single decide requests for 9 messages in batches of %d, want 2 and 1", calls, singles, size)
	}
	alone := stored(oneByOne{decider})
	if n := m.Calls(llmtest.StepDecide) - singles; n != 9 {
		t.Fatalf("%d single decide requests one by one, want 9", n)
	}
	if len(batched) == 0 || !slices.Equal(batched, alone) {
		t.Fatalf("batched decisions stored\n%v\none by one\n%v", batched, alone)
	}
}
