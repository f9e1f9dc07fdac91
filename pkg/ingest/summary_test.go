package ingest_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/session"
)

// summaryDue is every summary_due event in the stream.
func summaryDue(t *testing.T, r rig) []events.Envelope {
	t.Helper()
	return bustest.StreamEvents(t, r.js, "mem.acme.summary.")
}

// Ingest announces a session's summary once per threshold crossing (SPEC B2),
// whatever the batches, and a redelivered batch announces nothing new.
func TestSummaryDueOncePerCrossing(t *testing.T) {
	r, w := newIngest(t, ingest.Config{Summary: session.SummaryTrigger{MessageThreshold: 10, KeepCount: 4, TokenPercent: 75, ContextWindowTokens: 1 << 20}})
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var envs []events.Envelope
	for i := range 30 {
		env := events.New(events.TypeObservation, "acme", "u1", "bot", "s1")
		env.TS = t0.Add(time.Duration(i) * time.Second)
		env.Observation = &events.Observation{Role: events.RoleUser, Text: "a message"}
		envs = append(envs, env)
	}
	for batch := range slices.Chunk(envs, 7) {
		for i, err := range w.HandleBatch(ctx, batch) {
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
		}
	}
	due := summaryDue(t, r)
	// Crossings at 11, 18 and 25 messages.
	var counts []int
	for _, d := range due {
		counts = append(counts, d.SummaryDue.Messages)
	}
	if !slices.Equal(counts, []int{14, 21, 28}) {
		t.Fatalf("summary_due at %v messages (batch ends), want [14 21 28]", counts)
	}
	// A redelivered batch re-announces its crossing with the same id: the stream drops it.
	w.HandleBatch(ctx, envs[21:28])
	if again := summaryDue(t, r); len(again) != len(due) {
		t.Fatalf("a redelivery added summary_due events: %d, then %d", len(due), len(again))
	}
}

// The token share triggers on its own.
func TestSummaryDueOnTokens(t *testing.T) {
	r, w := newIngest(t, ingest.Config{Summary: session.SummaryTrigger{MessageThreshold: 1000, KeepCount: 4, TokenPercent: 50, ContextWindowTokens: 100}})
	env := events.New(events.TypeObservation, "acme", "u1", "bot", "s1")
	env.Observation = &events.Observation{Role: events.RoleUser, Text: strings.Repeat("word ", 50)} // 63 tokens
	if errs := w.HandleBatch(context.Background(), []events.Envelope{env}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	due := summaryDue(t, r)
	if len(due) != 1 || due[0].SummaryDue.Tokens != 63 || !strings.HasSuffix(due[0].ID, "-t1") {
		t.Fatalf("summary_due %+v", due)
	}
}

func TestSummaryTriggerValidate(t *testing.T) {
	if _, w := newIngest(t, ingest.Config{}); w == nil {
		t.Fatal("the zero trigger was refused")
	}
	for _, tr := range []session.SummaryTrigger{{MessageThreshold: 4, KeepCount: 4}, {MessageThreshold: 5, TokenPercent: 101}, {MessageThreshold: -1}} {
		if err := tr.Validate(); err == nil {
			t.Errorf("%+v accepted", tr)
		}
	}
}

// With Deps.Policy the session's policy sets the trigger: an evolved threshold
// reaches the sessions that get it (SPEC B5).
func TestSummaryTriggerFollowsTheSessionPolicy(t *testing.T) {
	r, w := newIngest(t, ingest.Config{Summary: session.SummaryTrigger{MessageThreshold: 20, KeepCount: 4}}, func(d *ingest.Deps) {
		d.Policy = func(_ context.Context, _, _, session string) policy.Policy {
			p := policy.Defaults()
			if session == "evolved" {
				p.SessionSummaryMessageThreshold = 5
			}
			return p
		}
	})
	for _, sess := range []string{"evolved", "configured"} {
		var batch []events.Envelope
		for range 6 {
			env := events.New(events.TypeObservation, "acme", "u1", "bot", sess)
			env.Observation = &events.Observation{Role: events.RoleUser, Text: "a message"}
			batch = append(batch, env)
		}
		for _, err := range w.HandleBatch(context.Background(), batch) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	due := summaryDue(t, r)
	if len(due) != 1 || due[0].SessionID != "evolved" {
		t.Fatalf("summary_due %+v, want one for the evolved session", due)
	}
}
