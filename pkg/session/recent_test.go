package session_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/session"
)

// Property: whatever order the sessions' events are applied in, by two
// stores (replicas) over one bucket, redelivered or not, a user's recent
// sessions are the newest RecentSessions by start, newest first, each with the
// agent that held it; Previous of each is the one that started before it.
func TestPropertyRecentSessionsAreTheNewestByStart(t *testing.T) {
	ctx := context.Background()
	_, _, js := bustest.Provisioned(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		user := fmt.Sprintf("u%d", run)
		cfg := session.Config{RecentSessions: rapid.IntRange(2, 5).Draw(rt, "keep")}
		stores := make([]*session.Store, 2)
		for i := range stores {
			s, err := session.New(ctx, cfg, js, nil)
			if err != nil {
				rt.Fatal(err)
			}
			stores[i] = s
		}
		n := rapid.IntRange(1, 8).Draw(rt, "sessions")
		t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		var envs []events.Envelope
		for i := range n {
			env := events.New(events.TypeObservation, "acme", user, fmt.Sprintf("agent-%d", i%3), fmt.Sprintf("s%d", i))
			env.TS = t0.Add(time.Duration(i) * time.Hour)
			env.Observation = &events.Observation{Kind: events.KindMessage, Role: events.RoleUser, Text: "hello"}
			envs = append(envs, env)
		}
		order := rapid.Permutation(append(slices.Clone(envs), envs[:rapid.IntRange(0, n).Draw(rt, "redelivered")]...)).Draw(rt, "order")
		for _, env := range order {
			if _, _, err := stores[rapid.IntRange(0, 1).Draw(rt, "store")].Apply(ctx, env); err != nil {
				rt.Fatal(err)
			}
		}
		got, err := stores[0].RecentSessions(ctx, "acme", user)
		if err != nil {
			rt.Fatal(err)
		}
		var want []session.RecentSession
		for i := n - 1; i >= 0 && len(want) < cfg.RecentSessions; i-- {
			want = append(want, session.RecentSession{SessionID: envs[i].SessionID, AgentID: envs[i].AgentID, StartedTS: envs[i].TS})
		}
		if !slices.EqualFunc(got, want, func(a, b session.RecentSession) bool {
			return a.SessionID == b.SessionID && a.AgentID == b.AgentID && a.StartedTS.Equal(b.StartedTS)
		}) {
			rt.Fatalf("recent sessions %+v, want %+v", got, want)
		}
		for i, r := range got {
			prev, ok := session.Previous(got, r.SessionID)
			if ok != (i+1 < len(got)) || ok && prev.SessionID != got[i+1].SessionID {
				rt.Fatalf("Previous(%s) = %+v, %v", r.SessionID, prev, ok)
			}
		}
		if prev, ok := session.Previous(got, "not-started"); !ok || prev.SessionID != got[0].SessionID {
			rt.Fatalf("Previous of a session without events = %+v, %v; want the newest", prev, ok)
		}
	})
}

// A session deleted (session clear) leaves the recent sessions; forget of the
// user takes them all, and another user's stay.
func TestRecentSessionsFollowDeleteAndForget(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{})
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i, sess := range []string{"s1", "s2", "s3"} {
		if _, _, err := s.Apply(ctx, obs(sess, events.Observation{Kind: events.KindMessage, Role: events.RoleUser, Text: "hi"}, t0.Add(time.Duration(i)*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	other := events.New(events.TypeObservation, "acme", "u2", "bot", "s9")
	other.Observation = &events.Observation{Kind: events.KindMessage, Role: events.RoleUser, Text: "hi"}
	if _, _, err := s.Apply(ctx, other); err != nil {
		t.Fatal(err)
	}
	ids := func(user string) []string {
		t.Helper()
		got, err := s.RecentSessions(ctx, "acme", user)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range got {
			out = append(out, r.SessionID)
		}
		return out
	}
	if got := ids("u1"); !slices.Equal(got, []string{"s3", "s2", "s1"}) {
		t.Fatalf("recent %v", got)
	}
	if err := s.Delete(ctx, "acme", "u1", "s2"); err != nil {
		t.Fatal(err)
	}
	if got := ids("u1"); !slices.Equal(got, []string{"s3", "s1"}) {
		t.Fatalf("after delete of s2: %v", got)
	}
	if _, _, err := s.DeleteUser(ctx, "acme", "u1"); err != nil {
		t.Fatal(err)
	}
	if got := ids("u1"); len(got) != 0 {
		t.Fatalf("after forget: %v", got)
	}
	if got := ids("u2"); !slices.Equal(got, []string{"s9"}) {
		t.Fatalf("u2's: %v", got)
	}
}
