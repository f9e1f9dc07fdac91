package processor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/records"
)

// modelDecider is an LLMDecider asking the fake model batch observations a request.
func modelDecider(t testing.TB, m *llmtest.Model, batch int) *LLMDecider {
	t.Helper()
	client, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "m", MaxRetries: -1, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewLLMDecider(LLMConfig{Client: client, DecideBatchSize: batch}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Batching changes no decision: DecideBatch gives each observation what Decide
// gives it alone, in order, whatever the batch size, with one request per
// batch of non-empty messages.
func TestDecideBatchDecidesAsOneByOne(t *testing.T) {
	m := llmtest.NewModel(t)
	ctx := context.Background()
	deciders := make([]*LLMDecider, 9)
	for size := 1; size < len(deciders); size++ {
		deciders[size] = modelDecider(t, m, size)
	}
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, len(deciders)-1).Draw(t, "batch")
		d := deciders[size]
		obs := rapid.Custom(func(t *rapid.T) records.Observation {
			return records.Observation{
				Role:   rapid.SampledFrom([]string{"user", "assistant", "tool"}).Draw(t, "role"),
				Who:    rapid.SampledFrom([]string{"", "Caroline"}).Draw(t, "who"),
				Text:   sentenceGen().Draw(t, "text"),
				TS:     time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "ts"), 0).UTC(),
				ChatID: rapid.StringMatching(`[a-z0-9]{1,6}`).Draw(t, "chat"),
			}
		})
		batch := rapid.SliceOfN(obs, 0, 20).Draw(t, "observations")
		calls := m.Calls(llmtest.StepDecideBatch) + m.Calls(llmtest.StepDecide)
		got, err := d.DecideBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(batch) {
			t.Fatalf("%d episodes for %d observations", len(got), len(batch))
		}
		if used := m.Calls(llmtest.StepDecideBatch) + m.Calls(llmtest.StepDecide) - calls; used > (len(batch)+size-1)/size {
			t.Fatalf("%d requests for %d observations in batches of %d", used, len(batch), size)
		}
		for i, o := range batch {
			alone, err := d.Decide(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if got[i] != alone {
				t.Fatalf("observation %d (%q): batched %+v, alone %+v", i, o.Text, got[i], alone)
			}
		}
	})
}

// A message the batched reply leaves out, or answers twice, gets the rule-based
// decision; the others keep the model's.
func TestDecideBatchFallsBackPerMissingMessage(t *testing.T) {
	m := llmtest.NewModel(t)
	m.SetAnswer(llmtest.StepDecideBatch, func(string) string {
		out, _ := json.Marshal(map[string]any{"decisions": []map[string]any{
			{"index": 1, "write": true, "thing": "model thing", "reason": "r"},
			{"index": 9, "write": true, "thing": "out of range", "reason": "r"},
		}})
		return string(out)
	})
	d := modelDecider(t, m, 4)
	obs := []records.Observation{
		{Role: "user", ChatID: "c", Text: "hello there"},
		{Role: "user", ChatID: "c", Text: "Remember that my sister lives in Porto."},
	}
	got, err := d.DecideBatch(context.Background(), obs)
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].Write || got[0].Thing != "model thing" {
		t.Errorf("answered message: %+v, want the model's write", got[0])
	}
	ruled, _ := NewRuleDecider().Decide(context.Background(), obs[1])
	ruled.ProcessedBy = records.ProcessedByRulesFallback
	if got[1] != ruled {
		t.Errorf("left-out message: %+v, want the rules' %+v", got[1], ruled)
	}
}

func TestLLMConfigBoundsDecideBatchSize(t *testing.T) {
	m := llmtest.NewModel(t)
	client, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{-1, MaxDecideBatchSize + 1} {
		if err := (LLMConfig{Client: client, DecideBatchSize: n}).Validate(); err == nil {
			t.Errorf("DecideBatchSize %d validated", n)
		}
	}
}
