package ingest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
)

func obsOf(sessions ...string) []events.Envelope {
	out := make([]events.Envelope, len(sessions))
	for i, s := range sessions {
		out[i] = events.New(events.TypeObservation, "acme", "u1", "bot", s)
	}
	return out
}

// A batch waits for the earlier batches of its sessions, and for nothing else.
func TestApplyOrderWaitsForEarlierBatchesOfTheSession(t *testing.T) {
	o := applyOrder{last: map[sessionOf]chan struct{}{}}
	first := o.enter(obsOf("s1", "s1"))
	second := o.enter(obsOf("s1", "s2"))
	s1, s2 := sessionOf{"acme", "u1", "s1"}, sessionOf{"acme", "u1", "s2"}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := second.wait(cancelled, s1); err == nil {
		t.Fatal("the second batch went on with s1 before the first applied it")
	}
	if err := second.wait(cancelled, s2); err != nil {
		t.Fatalf("s2 has no earlier batch, yet the second batch waited: %v", err)
	}
	first.leave()
	first.leave() // again: harmless
	if err := second.wait(context.Background(), s1); err != nil {
		t.Fatal(err)
	}
	second.leave()
	if len(o.last) != 0 {
		t.Fatalf("%d sessions still queued after every batch left", len(o.last))
	}
}

// Property: batches started one after the other and run concurrently apply each
// session in the order they started, whatever the scheduling.
func TestPropertyApplyOrderIsStartOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		o := applyOrder{last: map[sessionOf]chan struct{}{}}
		n := rapid.IntRange(1, 12).Draw(rt, "batches")
		var (
			mu      sync.Mutex
			applied = map[sessionOf][]int{}
			want    = map[sessionOf][]int{}
			wg      sync.WaitGroup
		)
		for b := range n {
			names := rapid.SliceOfN(rapid.SampledFrom([]string{"s1", "s2", "s3"}), 1, 4).Draw(rt, fmt.Sprint("batch", b))
			envs := obsOf(names...)
			turns := o.enter(envs)
			keys := map[sessionOf]bool{}
			for _, e := range envs {
				keys[sessionOf{e.Tenant, e.UserID, e.SessionID}] = true
			}
			for k := range keys {
				want[k] = append(want[k], b)
			}
			wg.Go(func() {
				defer turns.leave()
				for k := range keys {
					if err := turns.wait(context.Background(), k); err != nil {
						rt.Error(err)
						return
					}
					mu.Lock()
					applied[k] = append(applied[k], b)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for k, w := range want {
			if !slices.Equal(applied[k], w) {
				rt.Fatalf("session %s applied by batches %v, want the start order %v", k.sessionID, applied[k], w)
			}
		}
	})
}
