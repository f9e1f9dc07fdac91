package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/eventstore"
)

func newStore(t *testing.T) *eventstore.Store {
	t.Helper()
	_, _, js := bustest.Provisioned(t)
	s, err := eventstore.New(eventstore.Config{}, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func message(session, text string, ts time.Time) events.Envelope {
	env := events.New(events.TypeObservation, "acme", "u1", "bot", session)
	env.TS = ts
	env.Observation = &events.Observation{Role: events.RoleUser, Text: text, Meta: map[string]any{"n": text}}
	return env
}

func TestSessionCRUD(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Now().UTC().Add(-time.Hour)
	var ids []string
	for i := range 5 {
		env := message("s1", fmt.Sprintf("m%d", i), t0.Add(time.Duration(i)*time.Minute))
		ids = append(ids, env.ID)
		if _, err := s.Save(ctx, env); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Save(ctx, message("s2", "other", t0)); err != nil {
			t.Fatal(err)
		}
	}
	// A repeated save of the same event is deduplicated by Nats-Msg-Id.
	again := message("s1", "m0", t0)
	again.ID = ids[0]
	if _, err := s.Save(ctx, again); err != nil {
		t.Fatal(err)
	}

	n, err := s.CountSession(ctx, "acme", "u1", "s1")
	if err != nil || n != 5 {
		t.Fatalf("CountSession = %d, %v; want 5", n, err)
	}
	all, err := s.ListSession(ctx, "acme", "u1", "s1", 0, 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("ListSession = %d, %v; want 5", len(all), err)
	}
	for i, st := range all {
		if st.Envelope.ID != ids[i] || st.Envelope.Observation.Text != fmt.Sprintf("m%d", i) {
			t.Fatalf("event %d = %s %q, want %s m%d (stream order)", i, st.Envelope.ID, st.Envelope.Observation.Text, ids[i], i)
		}
	}
	page, err := s.ListSession(ctx, "acme", "u1", "s1", 1, 2)
	if err != nil || len(page) != 2 || page[0].Envelope.ID != ids[1] || page[1].Envelope.ID != ids[2] {
		t.Fatalf("ListSession(offset 1, limit 2) = %+v, %v", page, err)
	}
	got, err := s.Get(ctx, "acme", "u1", "s1", ids[3])
	if err != nil || got.Envelope.Observation.Meta["n"] != "m3" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, "acme", "u1", "s1", "01NOPE"); !errors.Is(err, eventstore.ErrNotFound) {
		t.Fatalf("Get missing: %v, want ErrNotFound", err)
	}

	removed, err := s.DeleteSession(ctx, "acme", "u1", "s1")
	if err != nil || removed != 5 {
		t.Fatalf("DeleteSession = %d, %v; want 5", removed, err)
	}
	if n, _ := s.CountSession(ctx, "acme", "u1", "s1"); n != 0 {
		t.Fatalf("after delete: %d events", n)
	}
	if n, _ := s.CountSession(ctx, "acme", "u1", "s2"); n != 5 {
		t.Fatalf("other session lost events: %d", n)
	}
}

func TestListRange(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if got, err := s.ListRange(ctx, "acme", "u1", time.Time{}, time.Time{}, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty stream: %v, %v", got, err)
	}
	for i := range 3 {
		if _, err := s.Save(ctx, message(fmt.Sprintf("s%d", i), "x", time.Now().UTC())); err != nil {
			t.Fatal(err)
		}
	}
	mid := time.Now()
	for i := range 2 {
		if _, err := s.Save(ctx, message(fmt.Sprintf("t%d", i), "y", time.Now().UTC())); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListRange(ctx, "acme", "u1", time.Unix(0, 0), time.Time{}, 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("all = %d, %v", len(all), err)
	}
	later, err := s.ListRange(ctx, "acme", "u1", mid, time.Time{}, 0)
	if err != nil || len(later) != 2 {
		t.Fatalf("since mid = %d, %v; want 2", len(later), err)
	}
	earlier, err := s.ListRange(ctx, "acme", "u1", time.Unix(0, 0), mid, 0)
	if err != nil || len(earlier) != 3 {
		t.Fatalf("before mid = %d, %v; want 3", len(earlier), err)
	}
	if _, err := s.ListRange(ctx, "acme", "u.1", mid, time.Time{}, 0); !errors.Is(err, events.ErrInvalidID) {
		t.Fatalf("bad user: %v", err)
	}
}

func TestSaveRejectsInvalid(t *testing.T) {
	s := newStore(t)
	env := message("s1", "", time.Now())
	env.Observation.Role = "robot"
	if _, err := s.Save(context.Background(), env); err == nil {
		t.Fatal("invalid event saved")
	}
}

// A session's events are its observations and its session_ended, nothing of another
// session or of the user's other subjects.
func TestSessionIncludesItsEndAndNothingElse(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Now().UTC()
	obs := message("s1", "hello", t0)
	end := events.New(events.TypeSessionEnded, "acme", "u1", "bot", "s1")
	other := message("s10", "elsewhere", t0)
	hit := events.New(events.TypeMemoryHit, "acme", "u1", "bot", "s1")
	hit.MemoryHit = &events.MemoryHit{MemoryIDs: []string{"m1"}}
	for _, env := range []events.Envelope{obs, other, hit, end} {
		if _, err := s.Save(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListSession(ctx, "acme", "u1", "s1", 0, 0)
	if err != nil || len(got) != 2 || got[0].Envelope.ID != obs.ID || got[1].Envelope.ID != end.ID {
		t.Fatalf("ListSession = %+v, %v; want the observation then the session_ended", got, err)
	}
	if n, err := s.CountSession(ctx, "acme", "u1", "s1"); err != nil || n != 2 {
		t.Fatalf("CountSession = %d, %v; want 2", n, err)
	}
	if n, err := s.DeleteSession(ctx, "acme", "u1", "s1"); err != nil || n != 2 {
		t.Fatalf("DeleteSession = %d, %v; want 2", n, err)
	}
	if n, _ := s.CountSession(ctx, "acme", "u1", "s10"); n != 1 {
		t.Fatalf("another session lost its events: %d left", n)
	}
}
