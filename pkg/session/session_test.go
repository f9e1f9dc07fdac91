package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/redact/redacttest"
	"github.com/agentmem/agentmem/pkg/session"
)

func newStore(t *testing.T, cfg session.Config) *session.Store {
	t.Helper()
	_, _, js := bustest.Provisioned(t)
	s, err := session.New(context.Background(), cfg, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func obs(sess string, o events.Observation, ts time.Time) events.Envelope {
	env := events.New(events.TypeObservation, "acme", "u1", "bot", sess)
	env.TS = ts
	env.Observation = &o
	return env
}

func TestApplyCountsAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{RecentMessages: 3})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var envs []events.Envelope
	for i := range 5 {
		envs = append(envs, obs("s1", events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("m%d", i)}, t0.Add(time.Duration(i)*time.Minute)))
	}
	envs = append(envs, obs("s1", events.Observation{Kind: events.KindToolCall, Role: events.RoleAssistant, ToolCall: &events.ToolCall{ID: "c1", Name: "read_csv"}}, t0.Add(10*time.Minute)))
	for _, env := range envs {
		if _, applied, err := s.Apply(ctx, env); err != nil || applied != session.Applied {
			t.Fatalf("apply %s: applied=%v err=%v", env.ID, applied, err)
		}
	}
	// Redelivery of every event changes nothing.
	for _, env := range envs {
		if _, applied, err := s.Apply(ctx, env); err != nil || applied != session.Duplicate {
			t.Fatalf("re-apply %s: applied=%v err=%v", env.ID, applied, err)
		}
	}
	st, err := s.Get(ctx, "acme", "u1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 5 || st.ByRole[events.RoleUser] != 5 || st.ToolCalls != 1 {
		t.Fatalf("counts = %+v", st)
	}
	if len(st.Recent) != 3 || st.Recent[0].Text != "m2" || st.Recent[2].Text != "m4" {
		t.Fatalf("recent = %+v, want m2..m4", st.Recent)
	}
	if !st.FirstTS.Equal(t0) || !st.LastTS.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("first/last = %v %v", st.FirstTS, st.LastTS)
	}
	if _, err := s.Get(ctx, "acme", "u1", "nope"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("missing session: %v", err)
	}
}

func TestConcurrentApplyLosesNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{RecentMessages: 500})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				env := obs("s1", events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("w%d-%d", w, i)}, time.Now().UTC())
				if _, _, err := s.Apply(ctx, env); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st, err := s.Get(ctx, "acme", "u1", "s1")
	if err != nil || st.Messages != 100 || len(st.Recent) != 100 {
		t.Fatalf("messages = %d recent = %d, err %v; want 100", st.Messages, len(st.Recent), err)
	}
}

func TestTurnStore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{})
	key, _ := events.SessionKey("acme", "u1", "s1")
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

	start := obs("s1", events.Observation{Kind: events.KindTurnStarted, Role: events.RoleAssistant,
		Turn: &events.TurnRecord{TurnID: "t1", Plan: "read the file", ToolCalls: []events.ToolCall{{ID: "c1", Name: "read_csv"}}}}, t0)
	finish := obs("s1", events.Observation{Kind: events.KindTurnFinished, Role: events.RoleAssistant,
		Turn: &events.TurnRecord{TurnID: "t1", Status: events.TurnOK, FinishedTS: t0.Add(time.Minute),
			ToolResults: []events.ToolResult{{CallID: "c1", Output: "3 columns"}}, FinalOutputObsID: "01OUT"}}, t0.Add(time.Minute))
	for _, env := range []events.Envelope{start, finish, finish} {
		if _, _, err := s.Apply(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetTurn(ctx, key, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != events.TurnOK || got.InputEventID != start.ID || got.Plan != "read the file" ||
		len(got.ToolCalls) != 1 || len(got.ToolResults) != 1 || !got.StartedTS.Equal(t0) || !got.FinishedTS.Equal(t0.Add(time.Minute)) {
		t.Fatalf("merged turn = %+v", got)
	}

	if err := s.SaveTurn(ctx, events.TurnRecord{TurnID: "t2", SessionKey: key, StartedTS: t0.Add(time.Hour), Status: events.TurnRunning}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateTurnStatus(ctx, key, "t2", events.TurnTimeout, "tool hung", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	turns, err := s.ListTurns(ctx, key)
	if err != nil || len(turns) != 2 || turns[0].TurnID != "t1" || turns[1].Status != events.TurnTimeout || turns[1].Error != "tool hung" {
		t.Fatalf("ListTurns = %+v, %v", turns, err)
	}
	if err := s.UpdateTurnStatus(ctx, key, "nope", events.TurnOK, "", t0); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("update missing turn: %v", err)
	}
	if n, err := s.CountTurns(ctx, key); err != nil || n != 2 {
		t.Fatalf("CountTurns = %d, %v", n, err)
	}
	if err := s.Delete(ctx, "acme", "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountTurns(ctx, key); err != nil || n != 0 {
		t.Fatalf("after delete CountTurns = %d, %v", n, err)
	}
	if _, err := s.Get(ctx, "acme", "u1", "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("state after delete: %v", err)
	}
	if _, err := s.GetTurn(ctx, "acme.u1.s1", "../x"); !errors.Is(err, events.ErrInvalidID) {
		t.Fatalf("bad turn id: %v", err)
	}
}

// Messages applied out of order (concurrent handlers, replicas) are kept in event-time
// order, and the bound drops the oldest by time.
func TestRecentIsOrderedByEventTime(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{RecentMessages: 3})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, i := range []int{3, 0, 4, 1, 2} {
		env := obs("s1", events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("m%d", i)}, t0.Add(time.Duration(i)*time.Minute))
		if _, _, err := s.Apply(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Get(ctx, "acme", "u1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range st.Recent {
		got = append(got, m.Text)
	}
	if fmt.Sprint(got) != "[m2 m3 m4]" {
		t.Fatalf("recent = %v, want [m2 m3 m4]", got)
	}
}

// An event id says what it is: the same id again with another ts is a duplicate,
// with other content a conflict, and neither changes the state. A state written
// before digests existed (bare ids in Applied) still recognises its duplicates.
func TestEventIDIsTheIdentity(t *testing.T) {
	ctx := context.Background()
	_, _, js := bustest.Provisioned(t)
	s, err := session.New(ctx, session.Config{}, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	first := obs("s1", events.Observation{Role: events.RoleUser, Text: "my files have columns a, b"}, t0)
	if _, got, err := s.Apply(ctx, first); err != nil || got != session.Applied {
		t.Fatalf("first: %v, %v", got, err)
	}
	want, err := s.Get(ctx, "acme", "u1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	later := first
	later.TS = t0.Add(time.Hour)
	if _, got, err := s.Apply(ctx, later); err != nil || got != session.Duplicate {
		t.Fatalf("same id, other ts: %v, %v; want a duplicate", got, err)
	}
	forged := first
	forged.Observation = &events.Observation{Role: events.RoleUser, Text: "my files have columns x, y"}
	if _, got, err := s.Apply(ctx, forged); err != nil || got != session.Conflict {
		t.Fatalf("same id, other text: %v, %v; want a conflict", got, err)
	}
	if got, err := s.Get(ctx, "acme", "u1", "s1"); err != nil || !slices.Equal(got.Applied, want.Applied) || got.Recent[0].Text != "my files have columns a, b" {
		t.Fatalf("state after a duplicate and a conflict: %+v (%v); want it unchanged", got, err)
	}

	legacy := obs("s2", events.Observation{Role: events.RoleUser, Text: "old"}, t0)
	key, err := events.SessionKey("acme", "u1", "s2")
	if err != nil {
		t.Fatal(err)
	}
	old, err := json.Marshal(session.State{Tenant: "acme", UserID: "u1", SessionID: "s2", Applied: []string{legacy.ID}})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "agentmem_sessions")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, old); err != nil {
		t.Fatal(err)
	}
	if _, got, err := s.Apply(ctx, legacy); err != nil || got != session.Duplicate {
		t.Fatalf("an id a legacy state applied: %v, %v; want a duplicate", got, err)
	}
}

// The session state in KV keeps no credential in clear: a message's text is
// stored with markers (pkg/redact), while its counts and the event itself are
// untouched.
func TestPropertyStateKeepsNoCredential(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{RecentMessages: 4})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		sess := fmt.Sprintf("s%d", n)
		secret := redacttest.Sentence().Draw(rt, "secret")
		env := obs(sess, events.Observation{Role: events.RoleUser, Text: secret.Text}, t0)
		if _, applied, err := s.Apply(ctx, env); err != nil || applied != session.Applied {
			rt.Fatalf("apply: %v %v", applied, err)
		}
		if _, applied, err := s.Apply(ctx, env); err != nil || applied != session.Duplicate {
			rt.Fatalf("re-apply: %v %v (the digest is of the event as published)", applied, err)
		}
		st, err := s.Get(ctx, "acme", "u1", sess)
		if err != nil {
			rt.Fatal(err)
		}
		raw, err := json.Marshal(st)
		if err != nil {
			rt.Fatal(err)
		}
		if v := secret.Leaks(string(raw)); v != "" || len(st.Recent) != 1 || !strings.Contains(st.Recent[0].Text, "[REDACTED:") {
			rt.Fatalf("state holds %q; recent %+v", v, st.Recent)
		}
		if env.Observation.Text != secret.Text {
			rt.Fatalf("the event was changed: %q", env.Observation.Text)
		}
	})
}

// Everything an event says is in its digest: the same id re-sent with another
// tool result, tool call, turn, kind, role or agent is a conflict, not a
// duplicate silently dropped, and leaves the state as the first made it.
func TestEventIDReusedWithOtherContentConflicts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	result := events.Observation{Kind: events.KindToolResult, Role: events.RoleTool, ToolResult: &events.ToolResult{CallID: "c1", Name: "read_csv", Output: "date,product,qty"}}
	call := events.Observation{Kind: events.KindToolCall, Role: events.RoleAssistant, ToolCall: &events.ToolCall{ID: "c1", Name: "read_csv", Arguments: json.RawMessage(`{"path":"sales.csv"}`)}}
	turn := events.Observation{Kind: events.KindTurnStarted, Role: events.RoleUser, Turn: &events.TurnRecord{TurnID: "t1"}}
	message := events.Observation{Role: events.RoleUser, Text: "hello"}
	for i, c := range []struct {
		name  string
		first events.Observation
		edit  func(*events.Envelope)
	}{
		{"tool result output", result, func(e *events.Envelope) {
			e.Observation.ToolResult = &events.ToolResult{CallID: "c1", Name: "read_csv", Output: "x,y"}
		}},
		{"tool call arguments", call, func(e *events.Envelope) {
			e.Observation.ToolCall = &events.ToolCall{ID: "c1", Name: "read_csv", Arguments: json.RawMessage(`{"path":"other.csv"}`)}
		}},
		{"turn", turn, func(e *events.Envelope) { e.Observation.Turn = &events.TurnRecord{TurnID: "t2"} }},
		{"kind", message, func(e *events.Envelope) { e.Observation.Kind = events.KindTurnStarted }},
		{"role", message, func(e *events.Envelope) { e.Observation.Role = events.RoleAssistant }},
		{"agent", message, func(e *events.Envelope) { e.AgentID = "other-bot" }},
	} {
		sess := fmt.Sprintf("s%d", i)
		first := obs(sess, c.first, t0)
		if _, got, err := s.Apply(ctx, first); err != nil || got != session.Applied {
			t.Fatalf("%s: first: %v, %v", c.name, got, err)
		}
		want, err := s.Get(ctx, "acme", "u1", sess)
		if err != nil {
			t.Fatal(err)
		}
		forged := first
		o := *first.Observation
		forged.Observation = &o
		c.edit(&forged)
		if _, got, err := s.Apply(ctx, forged); err != nil || got != session.Conflict {
			t.Fatalf("same id, other %s: %v, %v; want a conflict", c.name, got, err)
		}
		if got, err := s.Get(ctx, "acme", "u1", sess); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: state after a conflict %+v (%v); want %+v", c.name, got, err, want)
		}
	}
}
