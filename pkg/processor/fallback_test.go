package processor_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
)

// Issue 22: with the model down, the rules decide, and what they wrote is
// marked; with the model up, the model decides and nothing is marked; a refused
// request is an error, not a fallback.
func TestFallbackDeciderStandsInWhileTheModelIsDown(t *testing.T) {
	m := llmtest.NewModel(t)
	client, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "m", MaxRetries: -1, Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	model, err := processor.NewLLMDecider(processor.LLMConfig{Client: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := processor.NewFallbackDecider(model, nil)
	obs := records.Observation{Role: "user", Who: "user", ChatID: "c1", TS: time.Unix(1700000000, 0).UTC(), Text: "Remember: my sister Ana lives in Porto."}
	ctx := context.Background()

	up, err := d.Decide(ctx, obs)
	if err != nil || up.ProcessedBy != "" || records.EpisodeMetadata(up, "c1")[records.MetaProcessedBy] != nil {
		t.Fatalf("model up: %+v, %v; want the model's decision, unmarked", up, err)
	}
	m.SetDown(true)
	down, err := d.Decide(ctx, obs)
	if err != nil || !down.Write || down.ProcessedBy != records.ProcessedByRulesFallback {
		t.Fatalf("model down: %+v, %v; want the rules' write, marked", down, err)
	}
	if got := records.EpisodeMetadata(down, "c1")[records.MetaProcessedBy]; got != records.ProcessedByRulesFallback {
		t.Errorf("metadata processed_by %v, want %s", got, records.ProcessedByRulesFallback)
	}
	m.SetDown(false)
	m.SetStatus(http.StatusUnauthorized)
	if _, err := d.Decide(ctx, obs); !errors.Is(err, llm.ErrRequest) {
		t.Errorf("refused: %v, want an error wrapping llm.ErrRequest", err)
	}
}
