package bus

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// flight is what one subscription shares between the messages it pulled and has
// not settled yet. Per subscription rather than per message, because a batching
// worker settles hundreds of messages at once: one ticker paces the "in progress"
// acks that extend their ack deadlines (a ticker and a timer per message cost
// more than the handler's own work on small messages), and one round trip
// confirms the acks written before it (instead of a request/reply per ack).
type flight struct {
	sub     *Subscriber
	running sync.WaitGroup // one per message being processed

	// beat is closed at each heartbeat and replaced by a fresh channel.
	beat atomic.Pointer[chan struct{}]

	mu    sync.Mutex
	round *ackRound // the acks the next flush confirms; nil when none waits

	flush chan struct{} // a round waits for a flush; buffered, one is enough
	done  chan struct{} // closed once nothing is in flight and pulling stopped
}

// ackRound is the acks one flush confirms.
type ackRound struct {
	done chan struct{} // closed when err is set
	err  error
}

// newFlight starts the subscription's ack confirmer and heartbeat; both end
// with stop.
func newFlight(s *Subscriber) *flight {
	f := &flight{sub: s, flush: make(chan struct{}, 1), done: make(chan struct{})}
	beat := make(chan struct{})
	f.beat.Store(&beat)
	go f.confirmAcks()
	go f.heartbeat()
	return f
}

// stop waits for every message in flight to be settled and ends the
// subscription's goroutines.
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

// ack acks msg and waits until the server confirms it received the ack: the
// server reads a connection's messages in order, so the PONG answering a PING
// written after the ack confirms it, and one flush confirms every ack written
// before it. Like a double ack's reply, the confirmation tells that the ack is
// not lost on the way; an ack lost with the server itself only redelivers a
// processed message, which handlers take as a no-op.
func (f *flight) ack(msg jetstream.Msg) error {
	if err := msg.Ack(); err != nil {
		return err
	}
	f.mu.Lock()
	r := f.round
	if r == nil {
		r = &ackRound{done: make(chan struct{})}
		f.round = r
	}
	f.mu.Unlock()
	select {
	case f.flush <- struct{}{}:
	default: // a flush is already asked for; it takes r along
	}
	<-r.done // bounded by ackTimeout
	return r.err
}

// ackTimeout bounds the wait for the server's confirmation of acks.
const ackTimeout = 5 * time.Second

// confirmAcks flushes the connection for each round of acks waiting, until the
// subscription ends (by then no ack waits: stop waits for every message).
func (f *flight) confirmAcks() {
	for {
		select {
		case <-f.done:
			return
		case <-f.flush:
		}
		f.mu.Lock()
		r := f.round
		f.round = nil
		f.mu.Unlock()
		if r == nil {
			continue
		}
		r.err = f.sub.cfg.Conn.FlushTimeout(ackTimeout)
		close(r.done)
	}
}
