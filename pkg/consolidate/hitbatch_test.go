package consolidate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// While one batch of a namespace is applied, the events arriving for it wait and
// are applied together in the next batch; every handler gets its batch's result,
// and the namespace's queue is dropped once idle.
func TestHitBatcherCoalescesANamespace(t *testing.T) {
	const waiting = 6
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		batches [][]string
	)
	errSecond := errors.New("second batch failed")
	b := &hitBatcher{apply: func(_ context.Context, _, _ string, hits []events.Envelope) error {
		mu.Lock()
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.ID)
		}
		batches = append(batches, ids)
		first := len(batches) == 1
		mu.Unlock()
		if first {
			<-release
			return nil
		}
		return errSecond
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hit := func(i int) events.Envelope {
		env := events.New(events.TypeMemoryHit, "acme", "u1", "", "")
		env.ID = fmt.Sprintf("hit%d", i)
		return env
	}
	results := make(chan error, waiting+1)
	go func() { results <- b.do(ctx, hit(0)) }()
	bustest.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(batches) != 1 {
			return errors.New("first batch not started")
		}
		return nil
	})
	for i := 1; i <= waiting; i++ {
		go func() { results <- b.do(ctx, hit(i)) }()
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if q := b.byKey[namespaceKey("acme", "u1")]; q == nil || q.pending == nil || len(q.pending.hits) != waiting {
			return errors.New("the waiting events have not joined one batch yet")
		}
		return nil
	})
	close(release)
	var ok, failed int
	for range waiting + 1 {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, errSecond):
			failed++
		default:
			t.Errorf("unexpected result %v", err)
		}
	}
	if ok != 1 || failed != waiting {
		t.Errorf("%d handlers succeeded and %d got the second batch's error; want 1 and %d", ok, failed, waiting)
	}
	if len(batches) != 2 || len(batches[1]) != waiting {
		t.Errorf("batches %v; want the first event alone, then the %d others together", batches, waiting)
	}
	if len(b.byKey) != 0 {
		t.Errorf("%d namespace queues left after every handler returned", len(b.byKey))
	}
}

// With a linger, events arriving after the first one while its batch is still
// open join that batch instead of starting their own.
func TestHitBatcherLingers(t *testing.T) {
	const later = 4
	var (
		mu      sync.Mutex
		batches []int
	)
	b := &hitBatcher{linger: 3 * time.Second, apply: func(_ context.Context, _, _ string, hits []events.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, len(hits))
		return nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results := make(chan error, later+1)
	send := func() { results <- b.do(ctx, events.New(events.TypeMemoryHit, "acme", "u1", "", "")) }
	go send()
	pending := func(n int) func() error {
		return func() error {
			b.mu.Lock()
			defer b.mu.Unlock()
			q := b.byKey[namespaceKey("acme", "u1")]
			if q == nil || len(q.turn) != 1 || q.pending == nil || len(q.pending.hits) != n {
				return fmt.Errorf("not yet %d events in the open batch", n)
			}
			return nil
		}
	}
	bustest.Eventually(t, 10*time.Second, pending(1))
	for range later {
		go send()
	}
	bustest.Eventually(t, 10*time.Second, pending(later+1))
	for range later + 1 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if len(batches) != 1 || batches[0] != later+1 {
		t.Errorf("batch sizes %v, want one batch of %d", batches, later+1)
	}
}
