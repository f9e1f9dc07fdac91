package session_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/session"
)

// genSessionEvents draws a pool of distinct events of session sess (messages of
// several roles, tool calls, turn starts; event times that tie and go backwards),
// then a delivery of them: a shuffled sequence in which some come twice.
func genSessionEvents(sess string) *rapid.Generator[[]events.Envelope] {
	return rapid.Custom(func(t *rapid.T) []events.Envelope {
		t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		pool := make([]events.Envelope, rapid.IntRange(1, 12).Draw(t, "events"))
		for i := range pool {
			ts := t0.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "minute")) * time.Minute)
			var o events.Observation
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0:
				o = events.Observation{Kind: events.KindToolCall, Role: events.RoleAssistant, ToolCall: &events.ToolCall{ID: "c", Name: "read_csv"}}
			case 1:
				o = events.Observation{Role: events.RoleAssistant, Text: fmt.Sprintf("answer %d", i)}
			default:
				o = events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("message %d", i)}
			}
			pool[i] = obs(sess, o, ts)
		}
		delivery := slices.Clone(pool)
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, len(pool)-1), 0, 4).Draw(t, "duplicates") {
			delivery = append(delivery, pool[i])
		}
		return rapid.Permutation(delivery).Draw(t, "delivery")
	})
}

// ApplyBatch is Apply one event after the other, in one compare-and-set: the same
// state (small windows included, so that dropping the oldest counts too) and the
// same applied flags. While the window holds every id, a batch applied again, in
// any order, changes nothing, and any order of the same delivery gives the same
// state but for the order of Applied.
func TestApplyBatchIsApplyOneByOne(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []session.Config{{RecentMessages: 3, AppliedWindow: 5}, {}} {
		s := newStore(t, cfg)
		n := 0
		rapid.Check(t, func(t *rapid.T) {
			n++
			one, batch, other := fmt.Sprintf("one-%d", n), fmt.Sprintf("batch-%d", n), fmt.Sprintf("other-%d", n)
			envs := genSessionEvents(one).Draw(t, "delivery")
			var wantApplied []session.Outcome
			for _, env := range envs {
				_, applied, err := s.Apply(ctx, env)
				if err != nil {
					t.Fatal(err)
				}
				wantApplied = append(wantApplied, applied)
			}
			want := get(t, s, one)

			inBatch := moveTo(envs, batch)
			st, applied, err := s.ApplyBatch(ctx, inBatch...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(applied, wantApplied) {
				t.Fatalf("applied = %v, one by one %v", applied, wantApplied)
			}
			if got := get(t, s, batch); !sameState(got, want) || !slices.Equal(got.Applied, want.Applied) {
				t.Fatalf("batch state\n%+v\none by one\n%+v", got, want)
			}
			if !sameState(st, want) {
				t.Fatalf("returned state %+v, stored %+v", st, want)
			}

			if cfg.AppliedWindow == 0 { // the default window holds every id drawn
				if _, again, err := s.ApplyBatch(ctx, rapid.Permutation(inBatch).Draw(t, "again")...); err != nil || slices.Contains(again, session.Applied) {
					t.Fatalf("batch applied again: applied %v, err %v", again, err)
				}
				if got := get(t, s, batch); !sameState(got, want) {
					t.Fatalf("state changed by a redelivered batch: %+v", got)
				}

				if _, _, err := s.ApplyBatch(ctx, rapid.Permutation(moveTo(envs, other)).Draw(t, "order")...); err != nil {
					t.Fatal(err)
				}
				got := get(t, s, other)
				if !sameState(got, want) || !sameElements(got.Applied, want.Applied) {
					t.Fatalf("another order gives\n%+v\nwant\n%+v", got, want)
				}
			}
		})
	}
}

func TestApplyBatchRejectsMixedSessions(t *testing.T) {
	s := newStore(t, session.Config{})
	a := obs("s1", events.Observation{Role: events.RoleUser, Text: "a"}, time.Now())
	b := obs("s2", events.Observation{Role: events.RoleUser, Text: "b"}, time.Now())
	if _, _, err := s.ApplyBatch(context.Background(), a, b); err == nil || !errors.Is(err, session.ErrMixedSessions) {
		t.Fatalf("err = %v, want ErrMixedSessions", err)
	}
	if _, err := s.Get(context.Background(), "acme", "u1", "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a rejected batch wrote state: %v", err)
	}
}

// moveTo returns envs as events of session sess, ids and everything else unchanged.
func moveTo(envs []events.Envelope, sess string) []events.Envelope {
	out := slices.Clone(envs)
	for i := range out {
		out[i].SessionID = sess
	}
	return out
}

func get(t *rapid.T, s *session.Store, sess string) session.State {
	st, err := s.Get(context.Background(), "acme", "u1", sess)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sameState compares everything but the session id and the order of Applied.
func sameState(a, b session.State) bool {
	a.SessionID, b.SessionID = "", ""
	a.Applied, b.Applied = nil, nil
	return reflect.DeepEqual(a, b)
}

func sameElements(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// Every turn of a batch reaches the turn store, not only the first; a turn
// that cannot be stored is an error of the batch, not dropped.
func TestApplyBatchStoresEveryTurn(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	turn := func(id string, at time.Duration) events.Envelope {
		return obs("s1", events.Observation{Kind: events.KindTurnStarted, Role: events.RoleAssistant, Turn: &events.TurnRecord{TurnID: id}}, t0.Add(at))
	}
	if _, _, err := s.ApplyBatch(ctx, turn("t1", 0), turn("t2", time.Second), turn("t3", 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	turns, err := s.ListTurns(ctx, "acme.u1.s1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range turns {
		ids = append(ids, tr.TurnID)
	}
	if !slices.Equal(ids, []string{"t1", "t2", "t3"}) {
		t.Fatalf("turns %v, want t1 t2 t3", ids)
	}
	if _, _, err := s.ApplyBatch(ctx, turn("t4", 3*time.Second), turn("../bad", 4*time.Second)); !errors.Is(err, events.ErrInvalidID) {
		t.Fatalf("a batch with a turn id that cannot be a key: %v, want ErrInvalidID", err)
	}
}

// The state counts each kind of observation on its own counter.
func TestStateCountsEachKind(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	call := events.Observation{Kind: events.KindToolCall, Role: events.RoleAssistant, ToolCall: &events.ToolCall{ID: "c1", Name: "read_csv"}}
	st, _, err := s.ApplyBatch(ctx,
		obs("s1", events.Observation{Role: events.RoleUser, Text: "hi"}, t0),
		obs("s1", call, t0.Add(time.Second)),
		obs("s1", call, t0.Add(2*time.Second)),
		obs("s1", events.Observation{Kind: events.KindToolResult, Role: events.RoleTool, ToolResult: &events.ToolResult{CallID: "c1", Output: "3 columns"}}, t0.Add(3*time.Second)),
		obs("s1", events.Observation{Kind: events.KindTurnStarted, Role: events.RoleAssistant, Turn: &events.TurnRecord{TurnID: "t1"}}, t0.Add(4*time.Second)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 1 || st.ToolCalls != 2 || st.ToolResults != 1 || st.Turns != 1 || st.ByRole[events.RoleUser] != 1 {
		t.Fatalf("messages %d, tool calls %d, tool results %d, turns %d, by role %v; want 1, 2, 1, 1, one user message",
			st.Messages, st.ToolCalls, st.ToolResults, st.Turns, st.ByRole)
	}
}
