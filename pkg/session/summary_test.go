package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/session"
)

// The summary has its own key: a compare-and-set against the revision read,
// never clobbered by the state's updates, deleted with the session.
func TestSummaryStore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var envs []events.Envelope
	for i := range 6 {
		env := obs("s1", events.Observation{Role: events.RoleUser, Text: "hi"}, t0.Add(time.Duration(i)*time.Second))
		envs = append(envs, env)
		if _, _, err := s.Apply(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.GetSummary(ctx, "acme", "u1", "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("GetSummary of none: %v", err)
	}
	sum := session.Summary{Text: "t", FirstEventID: envs[0].ID, LastEventID: envs[2].ID, ThroughTS: envs[2].TS, Messages: 3, By: session.SummaryByRules}
	rev, err := s.PutSummary(ctx, "acme", "u1", "s1", sum, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSummary(ctx, "acme", "u1", "s1", sum, 0); !errors.Is(err, session.ErrSummaryChanged) {
		t.Fatalf("a second create: %v", err)
	}
	// The state moves on; the summary stays.
	if _, _, err := s.Apply(ctx, obs("s1", events.Observation{Role: events.RoleUser, Text: "more"}, t0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	got, rev2, err := s.GetSummary(ctx, "acme", "u1", "s1")
	if err != nil || rev2 != rev || got.LastEventID != envs[2].ID {
		t.Fatalf("summary %+v rev %d (%v), want rev %d", got, rev2, err, rev)
	}
	st, _ := s.Get(ctx, "acme", "u1", "s1")
	if after := got.After(st.Recent); len(after) != 4 || after[0].EventID != envs[3].ID {
		t.Fatalf("After = %+v", after)
	}
	if ok, err := s.ClaimReflection(ctx, "acme", "u1", "s1", 1); !ok || err != nil {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if ok, _ := s.ClaimReflection(ctx, "acme", "u1", "s1", 1); ok {
		t.Fatal("claimed reflection 1 twice")
	}
	if ok, _ := s.ClaimReflection(ctx, "acme", "u1", "s1", 2); !ok {
		t.Fatal("reflection 2 not claimed")
	}
	if err := s.Delete(ctx, "acme", "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetSummary(ctx, "acme", "u1", "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("summary after Delete: %v", err)
	}
	if ok, _ := s.ClaimReflection(ctx, "acme", "u1", "s1", 1); !ok {
		t.Fatal("the reflection claim survived Delete")
	}
	// A cleared session summarised again: created over the delete marker.
	if _, err := s.PutSummary(ctx, "acme", "u1", "s1", sum, 0); err != nil {
		t.Fatalf("summary after Delete: %v", err)
	}
}
