package retrieve

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/obs"
)

// hitQueueSize bounds the memory_hit events waiting for the publisher. A full
// queue holds the context request back until there is room: a hit is never
// dropped, and a JetStream that cannot keep up slows the packs that feed it.
const hitQueueSize = 1024

// hitEvent is what a memory_hit event is built from.
type hitEvent struct {
	tenant string
	req    events.ContextRequest
	ids    []string
	ts     time.Time
}

// sentHit is a published memory_hit awaiting its acknowledgement.
type sentHit struct {
	fut      jetstream.PubAckFuture
	ev       hitEvent
	id       string
	deadline time.Time
}

// hitPublisher publishes the memory_hit events of context packs from one
// long-lived goroutine: a request hands its event over and returns, and the
// goroutine builds and publishes each event and awaits its acknowledgement,
// with several in flight at once. A goroutine and a timer per request cost more
// CPU and garbage, and each new goroutine grew its stack again for the JSON
// encoding.
//
// Before start and after stop, an event is published and awaited on the
// caller's goroutine instead, so that none is lost; stop returns once every
// queued event is acknowledged or has failed (logged).
type hitPublisher struct {
	js      jetstream.JetStream
	logger  *zap.Logger
	timeout time.Duration // how long an acknowledgement is awaited

	mu      sync.RWMutex // shared by enqueue, exclusive to start and stop
	running bool
	queue   chan hitEvent
	done    chan struct{}
}

func newHitPublisher(js jetstream.JetStream, logger *zap.Logger, timeout time.Duration) *hitPublisher {
	return &hitPublisher{js: js, logger: logger, timeout: timeout}
}

// start launches the publishing goroutine.
func (p *hitPublisher) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = make(chan hitEvent, hitQueueSize)
	p.done = make(chan struct{})
	p.running = true
	go p.run(p.queue, p.done)
}

// stop closes the queue and waits until the goroutine has published every event
// in it and their acknowledgements have come or timed out.
func (p *hitPublisher) stop() {
	p.mu.Lock()
	if !p.running {
		p.mu.Unlock()
		return
	}
	p.running = false
	close(p.queue)
	done := p.done
	p.mu.Unlock()
	<-done
}

// enqueue hands ev to the publishing goroutine or, when it is not running,
// publishes ev and awaits its acknowledgement right here.
func (p *hitPublisher) enqueue(ev hitEvent) {
	p.mu.RLock()
	if p.running {
		p.queue <- ev
		p.mu.RUnlock()
		return
	}
	p.mu.RUnlock()
	one := make(chan hitEvent, 1)
	one <- ev
	close(one)
	p.run(one, make(chan struct{}))
}

// run publishes queue's events until it is closed and every acknowledgement has
// come or timed out, then closes done. Acknowledgements are awaited oldest
// first while new events keep being published.
func (p *hitPublisher) run(queue <-chan hitEvent, done chan<- struct{}) {
	defer close(done)
	var pending []sentHit
	timeout := time.NewTimer(p.timeout)
	defer timeout.Stop()
	for queue != nil || len(pending) > 0 {
		var (
			acked   <-chan *jetstream.PubAck
			failed  <-chan error
			expired <-chan time.Time
		)
		if len(pending) > 0 {
			acked, failed, expired = pending[0].fut.Ok(), pending[0].fut.Err(), timeout.C
		}
		select {
		case ev, ok := <-queue:
			if !ok {
				queue = nil
				continue
			}
			if h, ok := p.send(ev); ok {
				pending = append(pending, h)
				if len(pending) == 1 {
					timeout.Reset(time.Until(h.deadline))
				}
			}
			continue
		case <-acked:
		case err := <-failed:
			p.logFailure(pending[0], "memory_hit event not stored", zap.Error(err))
		case <-expired:
			p.logFailure(pending[0], "memory_hit event not acknowledged", zap.Duration("waited", p.timeout))
		}
		pending[0] = sentHit{}
		pending = pending[1:]
		if len(pending) > 0 {
			timeout.Reset(time.Until(pending[0].deadline))
		}
	}
}

// send builds ev's memory_hit event and publishes it asynchronously, with the
// event id as Nats-Msg-Id so that JetStream drops a duplicate; a failure is
// logged and reported as false.
func (p *hitPublisher) send(ev hitEvent) (sentHit, bool) {
	env := events.New(events.TypeMemoryHit, ev.tenant, ev.req.UserID, ev.req.AgentID, ev.req.SessionID)
	env.TS = ev.ts
	env.MemoryHit = &events.MemoryHit{MemoryIDs: ev.ids, Query: ev.req.Query}
	h := sentHit{ev: ev, id: env.ID, deadline: time.Now().Add(p.timeout)}
	msg, err := eventstore.Msg(env)
	if err == nil {
		h.fut, err = p.js.PublishMsgAsync(msg)
	}
	if err != nil {
		p.logFailure(h, "memory_hit event not published", zap.Error(err))
		return sentHit{}, false
	}
	return h, true
}

// logFailure logs what became of h; the logger's fields are built only here,
// not for every event.
func (p *hitPublisher) logFailure(h sentHit, msg string, f zap.Field) {
	p.logger.Error(msg, obs.Tenant(h.ev.tenant), obs.User(h.ev.req.UserID), obs.EventID(h.id), f)
}
