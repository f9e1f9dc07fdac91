package processor

import (
	"context"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/records"
)

// benchObservation is an observation of agentmem bench's ingest phase, with the
// two messages before it that ingest keeps as its context.
func benchObservation() records.Observation {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return records.Observation{
		Role: "user", Text: "I have been leading the sales forecast project for 12 months.",
		TS: at, ChatID: "s-00042", EventID: "01JD3QZ7X4K9M2N8P5R6S7T8V9",
		Meta: map[string]any{"dia_id": "D43:7"},
		Before: []records.Utterance{
			{Role: "user", Text: "My sister moved to Lisbon last spring.", EventID: "01JD3QZ7X4K9M2N8P5R6S7T8V7", Meta: map[string]any{"dia_id": "D43:5"}},
			{Role: "user", Text: "I prefer bar charts for the weekly report.", EventID: "01JD3QZ7X4K9M2N8P5R6S7T8V8", Meta: map[string]any{"dia_id": "D43:6"}},
		},
	}
}

// BenchmarkRuleDeciderDecide is the offline write decision ingest makes per message.
func BenchmarkRuleDeciderDecide(b *testing.B) {
	obs := benchObservation()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ep, err := (RuleDecider{}).Decide(ctx, obs); err != nil || !ep.Write {
			b.Fatalf("Decide = %+v, %v; want a write", ep, err)
		}
	}
}

// BenchmarkEpisodeRecord is building the episodic record of a kept message.
func BenchmarkEpisodeRecord(b *testing.B) {
	obs := benchObservation()
	ep, err := (RuleDecider{}).Decide(context.Background(), obs)
	if err != nil || !ep.Write {
		b.Fatalf("Decide = %+v, %v; want a write", ep, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if rec := records.EpisodeRecord("acme", "u1", obs, ep); rec.ID == "" {
			b.Fatal("record without id")
		}
	}
}
