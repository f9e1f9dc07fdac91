package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
)

// BatchHandler processes events together, so that a worker pays for a store
// transaction or a round trip once per batch instead of once per event. It returns
// one result per event, in the order of envs: nil for success, an error (wrapped
// with bus.Permanent for input that can never succeed) for an event to retry or
// dead-letter alone. A nil slice means every event succeeded. An event's message is
// acked only after the call returned nil for it, so the handler must have stored
// durably whatever the event produced before it returns. Handlers must be
// idempotent: JetStream delivers at least once, and a retried event comes back in
// another batch.
type BatchHandler func(ctx context.Context, envs []events.Envelope) []error

// BatchConfig configures how a batching worker groups the messages in flight.
type BatchConfig struct {
	// MaxSize is the most events one BatchHandler call gets; default 128.
	MaxSize int
	// Linger is how long a batch that is not full waits for more events after its
	// first one; default 5ms. It bounds the latency batching adds to a trickle of
	// events; under load it is what lets a batch grow while messages are still
	// being dispatched to it.
	Linger time.Duration
}

func (c *BatchConfig) setDefaults() {
	if c.MaxSize == 0 {
		c.MaxSize = 128
	}
	if c.Linger == 0 {
		c.Linger = 5 * time.Millisecond
	}
}

// Validate reports configuration errors.
func (c BatchConfig) Validate() error {
	if c.MaxSize < 0 || c.Linger < 0 {
		return fmt.Errorf("%w: batch MaxSize %d and Linger %s must not be negative", ErrInvalidConfig, c.MaxSize, c.Linger)
	}
	return nil
}

// NewBatch returns a Worker that hands the events in flight to handle in batches.
// The Router still sees one message at a time, so its retries, timeouts and dead
// letters stay per message: the messages handled concurrently are collected into
// a batch, and each message's handler returns its own result once the batch call
// returned. A zero cfg.Concurrency defaults to four batches: the time a batch
// spends in round trips (state, store, publish acks) is hidden behind the others.
func NewBatch(cfg Config, bc BatchConfig, handle BatchHandler, logger *zap.Logger) (*Worker, error) {
	bc.setDefaults()
	if err := bc.Validate(); err != nil {
		return nil, err
	}
	if handle == nil {
		return nil, fmt.Errorf("%w: %s: nil batch handler", ErrInvalidConfig, cfg.Worker)
	}
	switch {
	case cfg.Concurrency == 0:
		cfg.Concurrency = 4 * bc.MaxSize
	case cfg.Concurrency < bc.MaxSize:
		// Every batch would wait out its Linger for events that cannot be in flight.
		return nil, fmt.Errorf("%w: %s: Concurrency %d is below the batch MaxSize %d", ErrInvalidConfig, cfg.Worker, cfg.Concurrency, bc.MaxSize)
	}
	w, err := newWorker(cfg, logger)
	if err != nil {
		return nil, err
	}
	w.batch = &batcher{cfg: bc, handle: handle, w: w, claimed: closed()}
	return w, nil
}

// batcher collects messages into batches for a BatchHandler. The first message of
// a batch makes its caller the batch's leader: it waits until the batch is full or
// Linger has passed, decodes every message, runs the BatchHandler with its own
// context and hands every member its result. Leaders need no goroutine of their
// own, so there is nothing to start or stop, and batches run concurrently when
// events arrive faster than one batch is handled.
//
// The leader decodes for all members because the Router runs every message on a
// fresh goroutine: decoding there grew each one's stack, a stack copy per message
// that cost more than the decoding; the leader's stack grows once per batch.
type batcher struct {
	cfg    BatchConfig
	handle BatchHandler
	w      *Worker // admits and claims the messages

	mu   sync.Mutex
	open *batch // the batch accepting messages, nil when none is
	// claimed is closed when the newest batch has claimed its events' ids.
	claimed chan struct{}
}

type batch struct {
	msgs []*message.Message
	full chan struct{} // closed when it reached MaxSize
	done chan struct{} // closed when results is set
	// prev is closed when the batch before this one claimed its ids and its
	// handler took its place (Started) or returned, claimed when this one did.
	prev, claimed chan struct{}
	// results[i] is the outcome of msgs[i].
	results []result
}

// submit adds msg to the open batch and returns its result.
func (b *batcher) submit(msg *message.Message) *result {
	b.mu.Lock()
	bt := b.open
	leader := bt == nil
	if leader {
		bt = &batch{msgs: make([]*message.Message, 0, b.cfg.MaxSize), full: make(chan struct{}), done: make(chan struct{}),
			prev: b.claimed, claimed: make(chan struct{})}
		b.open = bt
		b.claimed = bt.claimed
	}
	i := len(bt.msgs)
	bt.msgs = append(bt.msgs, msg)
	if len(bt.msgs) == b.cfg.MaxSize {
		b.open = nil
		close(bt.full)
	}
	b.mu.Unlock()

	if leader {
		b.lead(msg.Context(), bt)
	} else {
		select {
		case <-bt.done:
		case <-msg.Context().Done():
			// The batch may still commit the event; redelivery of it is harmless.
			return &result{err: fmt.Errorf("pipeline: waiting for the batch of message %s: %w", msg.UUID, msg.Context().Err())}
		}
	}
	return &bt.results[i]
}

// lead closes bt once it is full or has lingered, handles it and publishes the results.
func (b *batcher) lead(ctx context.Context, bt *batch) {
	linger := time.NewTimer(b.cfg.Linger)
	select {
	case <-bt.full:
	case <-linger.C:
	}
	linger.Stop()
	b.mu.Lock()
	if b.open == bt {
		b.open = nil
	}
	b.mu.Unlock()

	results := make([]result, len(bt.msgs))
	b.decodeAll(ctx, bt.msgs, results, bt.prev)
	var once sync.Once
	release := func() { once.Do(func() { close(bt.claimed) }) }
	defer release()
	envs := make([]events.Envelope, 0, len(bt.msgs))
	owners := make([]int, 0, len(bt.msgs)) // owners[j]: the index in bt.msgs of envs[j]
	for i, r := range results {
		if r.decoded {
			envs = append(envs, r.env)
			owners = append(owners, i)
		}
	}
	if len(envs) > 0 {
		for j, err := range b.run(context.WithValue(ctx, startedKey{}, release), envs) {
			results[owners[j]].err = err
		}
	}
	bt.results = results
	close(bt.done)
}

// decodeAll decodes msgs into results: each is admitted and asked about its
// tenant's quota (in the batch's order, the stream's), then, with a Claim,
// claimed after the batches that started before this one claimed theirs
// (prev), and within the batch in stream order per event id, so that of two
// events reusing an id the earlier one claims first; distinct ids are claimed
// up to claimParallel at once, each a round trip to the claims bucket.
func (b *batcher) decodeAll(ctx context.Context, msgs []*message.Message, results []result, prev <-chan struct{}) {
	claiming := b.w.cfg.Claim != nil
	groups := map[string][]int{} // by tenant and event id: indices into msgs
	for i, msg := range msgs {
		env, err := b.w.admit(msg)
		if err == nil {
			err = b.w.quota(msg, env)
		}
		if err != nil {
			results[i].err = err
			continue
		}
		results[i] = result{env: env, decoded: true}
		if claiming {
			k := env.Tenant + "." + env.ID
			groups[k] = append(groups[k], i)
		}
	}
	if !claiming {
		return
	}
	select {
	case <-prev:
	case <-ctx.Done():
	}
	work := make(chan []int, len(groups))
	for _, idx := range groups {
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(streamSeq(msgs[a]), streamSeq(msgs[b])) })
		work <- idx
	}
	close(work)
	// A few claimants take the groups in turn: a goroutine per group grew a fresh
	// stack for every claim's round trip.
	var wg sync.WaitGroup
	for range min(claimParallel, len(groups)) {
		wg.Go(func() {
			for idx := range work {
				for _, i := range idx {
					if err := b.w.claim(ctx, msgs[i], results[i].env); err != nil {
						results[i] = result{err: err}
					}
				}
			}
		})
	}
	wg.Wait()
}

// claimParallel bounds the claims of one batch in flight.
const claimParallel = 16

// run calls the BatchHandler and returns exactly one result per event: a panic or a
// malformed result fails every event of the batch (to be retried) rather than
// leaving its members waiting.
func (b *batcher) run(ctx context.Context, envs []events.Envelope) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			errs = fill(len(envs), fmt.Errorf("pipeline: batch handler panicked: %v", r))
		}
	}()
	errs = b.handle(ctx, envs)
	switch len(errs) {
	case len(envs):
		return errs
	case 0:
		return make([]error, len(envs))
	}
	return fill(len(envs), fmt.Errorf("pipeline: batch handler returned %d results for %d events", len(errs), len(envs)))
}

// Started, called by a BatchHandler once its batch has taken its place among
// the batches in flight, lets the next batch claim its ids and start. The
// batches reach their handler in the stream's order, and a handler that orders
// them on entry (ingest folds each session's messages into its state in batch
// order) then sees that order, not whichever batch's claims finished first.
// The next batch also goes on once the handler returns.
func Started(ctx context.Context) {
	if release, ok := ctx.Value(startedKey{}).(func()); ok {
		release()
	}
}

type startedKey struct{}

// closed is a closed channel: the first batch waits for no other.
func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func fill(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
