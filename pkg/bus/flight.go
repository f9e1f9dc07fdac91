package bus

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
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

	mu    sync.Mutex
	turns map[string]chan struct{} // per ordering key: closed when its last turn ends
}

// newFlight starts the subscription's heartbeat; it ends with stop.
func newFlight(s *Subscriber) *flight {
	f := &flight{sub: s, done: make(chan struct{}), turns: make(map[string]chan struct{})}
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

// turn is one message's place in the queue of its ordering key
// (SubscriberConfig.OrderKey): it may be handed out once after is closed, and it
// closes done when it is settled.
type turn struct {
	f     *flight
	key   string
	after <-chan struct{} // nil: first in line, or not ordered
	done  chan struct{}
}

// takeTurn queues a message of key behind the last one taken; "" is not ordered.
func (f *flight) takeTurn(key string) turn {
	if key == "" {
		return turn{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := turn{f: f, key: key, after: f.turns[key], done: make(chan struct{})}
	f.turns[key] = t.done
	return t
}

// queued reports whether the message has a predecessor to wait for.
func (t turn) queued() bool { return t.after != nil }

// wait blocks until the message's predecessor is settled, extending the message's
// ack deadline meanwhile; false when stop closed first (the caller hands the
// message back rather than handling it out of turn).
func (t turn) wait(f *flight, msg jetstream.Msg, stop <-chan struct{}) bool {
	beat := f.nextBeat()
	for {
		select {
		case <-t.after:
			// A predecessor handed back at a stop lets this one go too: at a
			// stop it goes back as well, never ahead of it.
			select {
			case <-stop:
				return false
			default:
				return true
			}
		case <-beat:
			beat = f.nextBeat()
			if err := msg.InProgress(); err != nil {
				f.sub.logger.Warn("extending the ack deadline of a message waiting for its turn", zap.String("subject", msg.Subject()), zap.Error(err))
			}
		case <-stop:
			return false
		}
	}
}

// end lets the next message of the key go, and forgets the key when none waits.
func (t turn) end() {
	if t.done == nil {
		return
	}
	close(t.done)
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.f.turns[t.key] == t.done {
		delete(t.f.turns, t.key)
	}
}
