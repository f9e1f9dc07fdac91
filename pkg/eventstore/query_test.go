package eventstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/eventstore"
)

// D2: the tenant's history by user, session and stored time, counted and paged,
// and one event found by its id alone.
func TestQueryListCountFind(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Now().UTC()
	save := func(env events.Envelope) uint64 {
		t.Helper()
		seq, err := s.Save(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	first := message("s1", "m0", t0)
	save(first)
	save(message("s1", "m1", t0))
	save(message("s2", "m2", t0))
	other := events.New(events.TypeObservation, "acme", "u2", "bot", "s1")
	other.Observation = &events.Observation{Role: events.RoleUser, Text: "u2"}
	save(other)
	hit := events.New(events.TypeConsolidateRequested, "acme", "u1", "", "")
	save(hit)
	foreign := events.New(events.TypeObservation, "globex", "u1", "bot", "s1")
	foreign.Observation = &events.Observation{Role: events.RoleUser, Text: "other tenant"}
	save(foreign)

	for _, tc := range []struct {
		name string
		q    eventstore.Query
		want int
	}{
		{"tenant", eventstore.Query{Tenant: "acme"}, 5},
		{"user", eventstore.Query{Tenant: "acme", User: "u1"}, 4},
		{"session", eventstore.Query{Tenant: "acme", User: "u1", Session: "s1"}, 2},
		{"future", eventstore.Query{Tenant: "acme", Since: time.Now().Add(time.Hour)}, 0},
		{"past", eventstore.Query{Tenant: "acme", Until: t0.Add(-time.Hour)}, 0},
		{"window", eventstore.Query{Tenant: "acme", User: "u1", Since: t0.Add(-time.Minute), Until: time.Now().Add(time.Minute)}, 4},
	} {
		n, err := s.Count(ctx, tc.q)
		if err != nil || n != tc.want {
			t.Errorf("%s: Count = %d, %v; want %d", tc.name, n, err, tc.want)
		}
		got, err := s.List(ctx, tc.q, 0, 0)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s: List = %d, %v; want %d", tc.name, len(got), err, tc.want)
		}
	}
	page, err := s.List(ctx, eventstore.Query{Tenant: "acme", User: "u1"}, 1, 2)
	if err != nil || len(page) != 2 || page[0].Envelope.Observation.Text != "m1" || page[1].Envelope.Observation.Text != "m2" {
		t.Fatalf("List(offset 1, limit 2) = %+v, %v", page, err)
	}
	got, err := s.Find(ctx, "acme", first.ID)
	if err != nil || got.Envelope.ID != first.ID || got.Envelope.Observation.Text != "m0" {
		t.Fatalf("Find = %+v, %v", got, err)
	}
	if _, err := s.Find(ctx, "acme", foreign.ID); !errors.Is(err, eventstore.ErrNotFound) {
		t.Fatalf("Find of another tenant's event = %v, want ErrNotFound", err)
	}
	if _, err := s.List(ctx, eventstore.Query{Tenant: "acme", User: "u.1"}, 0, 0); !errors.Is(err, eventstore.ErrInvalidQuery) {
		t.Fatalf("List with a bad user = %v, want ErrInvalidQuery", err)
	}
}
