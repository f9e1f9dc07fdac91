package bus

import (
	"sync"
	"sync/atomic"
	"time"
)

// flight is what one subscription shares between the messages it pulled and has
// not settled yet: one ticker paces the "in progress" acks that extend their ack
// deadlines, where a ticker and a timer per message cost more than the handler's
// own work on small messages in a batching worker.
type flight struct {
	sub     *Subscriber
	running sync.WaitGroup // one per message being processed

	// beat is closed at each heartbeat and replaced by a fresh channel.
	beat atomic.Pointer[chan struct{}]

	done chan struct{} // closed once nothing is in flight and pulling stopped
}

// newFlight starts the subscription's heartbeat; it ends with stop.
func newFlight(s *Subscriber) *flight {
	f := &flight{sub: s, done: make(chan struct{})}
	beat := make(chan struct{})
	f.beat.Store(&beat)
	go f.heartbeat()
	return f
}

// stop waits for every message in flight to be settled and ends the
// subscription's heartbeat.
func (f *flight) stop() {
	f.running.Wait()
	close(f.done)
}

// nextBeat is closed at the next heartbeat. Heartbeats come every half of the
// consumer's shortest ack deadline, so a message that waits for the next one
// from its hand-out on is extended before its deadline passes.
func (f *flight) nextBeat() <-chan struct{} { return *f.beat.Load() }

func (f *flight) heartbeat() {
	tick := time.NewTicker(f.sub.cfg.Consumer.minAckDeadline() / 2)
	defer tick.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-tick.C:
			next := make(chan struct{})
			close(*f.beat.Swap(&next))
		}
	}
}
