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

// Replicas of ingest share the state bucket, each with its own cache of the states
// it wrote: whichever store applies whichever part of a delivery, and whatever the
// other wrote or deleted in between, the state is the one a single store applying
// the events one by one keeps. A cache of one session also makes every store
// forget the states of the others' sessions.
func TestApplyBatchAcrossStoresIsApplyOneByOne(t *testing.T) {
	ctx := context.Background()
	_, _, js := bustest.Provisioned(t)
	var stores []*session.Store
	for _, cfg := range []session.Config{{}, {}, {CachedStates: 1}} {
		s, err := session.New(ctx, cfg, js, nil)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		shared, alone := fmt.Sprintf("shared-%d", n), fmt.Sprintf("alone-%d", n)
		envs := genSessionEvents(shared).Draw(t, "delivery")
		// A session stores 0 and 1 never see, so that store 2's one-entry cache
		// keeps losing shared's state.
		if _, _, err := stores[2].ApplyBatch(ctx, obs(fmt.Sprintf("evict-%d", n), events.Observation{Role: events.RoleUser, Text: "x"}, time.Now())); err != nil {
			t.Fatal(err)
		}
		for rest := envs; len(rest) > 0; {
			size := rapid.IntRange(1, len(rest)).Draw(t, "batch")
			s := stores[rapid.IntRange(0, len(stores)-1).Draw(t, "store")]
			if _, _, err := s.ApplyBatch(ctx, rest[:size]...); err != nil {
				t.Fatal(err)
			}
			rest = rest[size:]
		}
		for _, env := range moveTo(envs, alone) {
			if _, _, err := stores[0].Apply(ctx, env); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := get(t, stores[0], shared), get(t, stores[0], alone); !sameState(got, want) || !sameElements(got.Applied, want.Applied) {
			t.Fatalf("applied across stores\n%+v\nby one store\n%+v", got, want)
		}
	})
}

// A session deleted through one store starts over in another that had cached it:
// the stale revision is refused, nothing of the deleted state comes back, and an
// event applied before the delete is applied again.
func TestApplyAfterDeleteByAnotherStore(t *testing.T) {
	ctx := context.Background()
	a, b := twoStores(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	first := obs("s1", events.Observation{Role: events.RoleUser, Text: "before"}, t0)
	if _, _, err := a.ApplyBatch(ctx, first, obs("s1", events.Observation{Role: events.RoleUser, Text: "also before"}, t0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "acme", "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	// Alone, first is what the stale cache says was applied.
	if _, applied, err := a.ApplyBatch(ctx, first); err != nil || !slices.Equal(applied, []session.Outcome{session.Applied}) {
		t.Fatalf("re-applying an event of the deleted state: applied %v, err %v; want it applied again", applied, err)
	}
	st, applied, err := a.ApplyBatch(ctx, obs("s1", events.Observation{Role: events.RoleUser, Text: "after"}, t0.Add(2*time.Minute)))
	if err != nil || !slices.Equal(applied, []session.Outcome{session.Applied}) {
		t.Fatalf("applied %v, err %v", applied, err)
	}
	stored, err := b.Get(ctx, "acme", "u1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []session.State{st, stored} {
		if got.Messages != 2 || len(got.Recent) != 2 || got.Recent[0].Text != "before" || got.Recent[1].Text != "after" {
			t.Fatalf("state after the delete = %+v, want only the two messages applied since", got)
		}
	}
}

// Get answers from the cache only while the stored revision is the cached one: a
// reader sees every write of another store, a copy it changes does not change
// the next answer, and a write after a Get that another store has overtaken still
// loses nothing.
func TestGetFollowsWritesOfOtherStores(t *testing.T) {
	ctx := context.Background()
	reader, writer := twoStores(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	say := func(s *session.Store, i int) {
		t.Helper()
		if _, _, err := s.Apply(ctx, obs("s1", events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("message %d", i)}, t0.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	texts := func(st session.State) []string {
		var out []string
		for _, m := range st.Recent {
			out = append(out, m.Text)
		}
		return out
	}
	expect := func(step string, want ...string) {
		t.Helper()
		for range 2 { // the decode, then the cached copy
			st, err := reader.Get(ctx, "acme", "u1", "s1")
			if err != nil || st.Messages != len(want) || !slices.Equal(texts(st), want) {
				t.Fatalf("%s: Get = %v (%d messages), %v; want %v", step, texts(st), st.Messages, err, want)
			}
			st.Recent[0].Text = "changed by the caller"
			st.Recent = append(st.Recent, session.Message{Text: "appended by the caller"})
			st.ByRole[events.RoleUser] = 99
		}
	}
	say(writer, 1)
	expect("first read", "message 1")
	say(writer, 2)
	expect("after another store's write", "message 1", "message 2")
	say(reader, 3) // from the state Get cached: one compare-and-set
	expect("after its own write", "message 1", "message 2", "message 3")
	say(writer, 4)
	say(reader, 5) // its cached revision is stale now
	expect("after overtaking writes", "message 1", "message 2", "message 3", "message 4", "message 5")
}

// twoStores returns two session stores on one provisioned server, as two
// replicas have.
func twoStores(t *testing.T) (*session.Store, *session.Store) {
	t.Helper()
	_, _, js := bustest.Provisioned(t)
	stores := make([]*session.Store, 2)
	for i := range stores {
		s, err := session.New(context.Background(), session.Config{}, js, nil)
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	return stores[0], stores[1]
}
