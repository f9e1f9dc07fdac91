package consolidate

import (
	"context"
	"sync"
	"time"

	"github.com/agentmem/agentmem/events"
)

// hitBatcher coalesces the memory_hit events of one namespace that are handled
// at the same time: while one batch is being applied, the events arriving for
// that namespace wait together, and the first of them to get the turn keeps the
// batch open for linger, then applies them all in one Runner.ApplyHits (one
// lease, one read and one update per memory). Each handler returns its batch's result, so an event is acked only
// after its batch is stored; when a batch fails every event in it is retried,
// which is harmless since ApplyHits skips the events a memory already counted.
type hitBatcher struct {
	apply  func(ctx context.Context, tenant, userID string, hits []events.Envelope) error
	linger time.Duration

	mu    sync.Mutex
	byKey map[string]*hitQueue // only namespaces with events in flight
}

// hitQueue is one namespace's turn (a token: whoever holds it applies a batch)
// and the batch still collecting events.
type hitQueue struct {
	turn    chan struct{}
	pending *hitBatch
	users   int // handlers holding this queue; the map entry goes with the last
}

type hitBatch struct {
	hits []events.Envelope
	done chan struct{}
	err  error // set before done is closed
}

// do adds hit to its namespace's pending batch and returns once that batch has
// been applied (by this handler or another).
func (b *hitBatcher) do(ctx context.Context, hit events.Envelope) error {
	key := namespaceKey(hit.Tenant, hit.UserID)
	b.mu.Lock()
	if b.byKey == nil {
		b.byKey = make(map[string]*hitQueue)
	}
	q := b.byKey[key]
	if q == nil {
		q = &hitQueue{turn: make(chan struct{}, 1)}
		b.byKey[key] = q
	}
	q.users++
	if q.pending == nil {
		q.pending = &hitBatch{done: make(chan struct{})}
	}
	batch := q.pending
	batch.hits = append(batch.hits, hit)
	b.mu.Unlock()
	defer b.leave(key, q)

	select {
	case <-batch.done:
		return batch.err
	case <-ctx.Done():
		return ctx.Err()
	case q.turn <- struct{}{}:
	}
	defer func() { <-q.turn }()
	b.mu.Lock()
	started := q.pending != batch // applied by an earlier holder of the turn
	b.mu.Unlock()
	if started {
		<-batch.done
		return batch.err
	}
	if b.linger > 0 {
		t := time.NewTimer(b.linger)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err() // the batch stays pending for the next holder of the turn
		}
	}
	b.mu.Lock()
	q.pending = nil // later events start the next batch
	b.mu.Unlock()
	// The batch runs under this handler's context: if its deadline cuts the batch
	// short, every event in it fails and is redelivered.
	batch.err = b.apply(ctx, hit.Tenant, hit.UserID, batch.hits)
	close(batch.done)
	return batch.err
}

// leave drops the namespace's queue once no handler holds it.
func (b *hitBatcher) leave(key string, q *hitQueue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q.users--
	if q.users == 0 && b.byKey[key] == q {
		delete(b.byKey, key)
	}
}
