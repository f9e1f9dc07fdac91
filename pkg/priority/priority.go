// Package priority lets latency-sensitive work of one process (context requests)
// go ahead of background work (ingest batches) on a machine whose CPUs both want.
// Nothing is preempted: background work waits to start while foreground work
// runs or ran a moment ago (Quiet: a client's next request follows its last
// reply closely), and never longer than MaxWait, so a steady stream of reads
// slows the background down without starving it.
package priority

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxWait bounds one wait of background work: about the time a context
// request takes on a busy machine, so a batch yields to the reads in flight but
// not to every read that follows.
const DefaultMaxWait = 50 * time.Millisecond

// Quiet is how long after the last foreground work background work still waits:
// the gap between a reply and the same client's next request.
const Quiet = 2 * time.Millisecond

// Gate orders foreground before background work. The zero value is not usable;
// a nil *Gate lets everything run at once.
type Gate struct {
	maxWait time.Duration

	mu       sync.Mutex
	active   int
	idle     chan struct{} // closed when active drops to 0; nil while active is 0
	lastDone time.Time     // when active last dropped to 0
}

// New returns a Gate whose background waits last at most maxWait (DefaultMaxWait
// when 0).
func New(maxWait time.Duration) *Gate {
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	return &Gate{maxWait: maxWait}
}

// Foreground marks foreground work as running until done is called.
func (g *Gate) Foreground() (done func()) {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	if g.active == 0 {
		g.idle = make(chan struct{})
	}
	g.active++
	g.mu.Unlock()
	return sync.OnceFunc(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.active--
		if g.active == 0 {
			close(g.idle)
			g.idle = nil
			g.lastDone = time.Now()
		}
	})
}

// Background waits until no foreground work runs or ran within Quiet, at most
// MaxWait, or until ctx ends (its error is returned then).
func (g *Gate) Background(ctx context.Context) error {
	if g == nil {
		return nil
	}
	var deadline <-chan time.Time
	for {
		g.mu.Lock()
		idle, since := g.idle, time.Since(g.lastDone)
		g.mu.Unlock()
		if idle == nil && since >= Quiet {
			return nil
		}
		if deadline == nil {
			t := time.NewTimer(g.maxWait)
			defer t.Stop()
			deadline = t.C
		}
		var quiet <-chan time.Time
		if idle == nil {
			t := time.NewTimer(Quiet - since)
			defer t.Stop()
			quiet = t.C
		}
		select {
		case <-idle:
		case <-quiet:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
