package ingest

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentmem/agentmem/events"
)

// applyOrder makes concurrent batches fold their sessions' observations into the
// session state in the order the batches started: a batch waits, per session it
// shares with an earlier one, until that one's state update is done. Batches fill
// in delivery order, so an episode's context lines (the messages said before it,
// read from the state) are then those of the stream, as in a replay, and not those
// a faster later batch happened to write first.
type applyOrder struct {
	mu   sync.Mutex
	last map[sessionOf]chan struct{} // closed when the latest batch of the session applied it
}

// turns is a batch's place behind the earlier batches of its sessions.
type turns struct {
	o     *applyOrder
	after map[sessionOf]chan struct{}
	done  chan struct{}
	once  sync.Once
}

// enter queues a batch of envs behind the earlier batches of the same sessions.
func (o *applyOrder) enter(envs []events.Envelope) *turns {
	t := &turns{o: o, after: make(map[sessionOf]chan struct{}), done: make(chan struct{})}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, env := range envs {
		k := sessionOf{env.Tenant, env.UserID, env.SessionID}
		if _, ok := t.after[k]; ok {
			continue
		}
		t.after[k] = o.last[k]
		o.last[k] = t.done
	}
	return t
}

// wait blocks until the earlier batches of session k applied it, or ctx ends.
func (t *turns) wait(ctx context.Context, k sessionOf) error {
	prev := t.after[k]
	if prev == nil {
		return nil
	}
	select {
	case <-prev:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ingest: waiting for an earlier batch of session %s/%s/%s: %w", k.tenant, k.userID, k.sessionID, ctx.Err())
	}
}

// leave lets the later batches of the sessions go; it may be called again.
func (t *turns) leave() {
	t.once.Do(func() {
		close(t.done)
		t.o.mu.Lock()
		defer t.o.mu.Unlock()
		for k := range t.after {
			if t.o.last[k] == t.done {
				delete(t.o.last, k)
			}
		}
	})
}
