package consolidate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// leaseValue is what a lease key holds: who holds it, for humans and logs.
type leaseValue struct {
	Owner    string    `json:"owner"`
	Acquired time.Time `json:"acquired"`
	Renewed  time.Time `json:"renewed"`
}

// leases hands out namespace leases from one KV bucket (see the package doc).
type leases struct {
	kv      jetstream.KeyValue
	ttl     time.Duration
	owner   string
	now     func() time.Time
	logger  *zap.Logger
	metrics runnerMetrics // counts the leases lost
}

// lease is one held lease; release it exactly once.
type lease struct {
	l      *leases
	key    string
	value  leaseValue
	ctx    context.Context // the run's context, cancelled when the lease is lost
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}

	mu  sync.Mutex
	rev uint64
}

// acquire takes the lease of key or fails with ErrLeaseHeld. The returned context
// is ctx, cancelled with ErrLeaseLost if the lease is lost before release.
func (l *leases) acquire(ctx context.Context, key string) (context.Context, *lease, error) {
	now := l.now().UTC()
	v := leaseValue{Owner: l.owner, Acquired: now, Renewed: now}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	rev, err := l.kv.Create(ctx, key, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, nil, fmt.Errorf("%w: namespace %s is held by %s", ErrLeaseHeld, key, l.holder(ctx, key))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("consolidate: acquire lease %s: %w", key, err)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	ls := &lease{l: l, key: key, value: v, ctx: runCtx, cancel: cancel, rev: rev, stop: make(chan struct{}), done: make(chan struct{})}
	go ls.renew()
	return runCtx, ls, nil
}

// holder names the current holder of key, for error messages.
func (l *leases) holder(ctx context.Context, key string) string {
	e, err := l.kv.Get(ctx, key)
	if err != nil {
		return "another owner"
	}
	var v leaseValue
	if json.Unmarshal(e.Value(), &v) != nil || v.Owner == "" {
		return "another owner"
	}
	return fmt.Sprintf("%s since %s", v.Owner, v.Acquired.Format(time.RFC3339))
}

// renew rewrites the key every TTL/3 until release; it cancels the run when the
// lease is lost.
func (ls *lease) renew() {
	defer close(ls.done)
	every := ls.l.ttl / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ls.stop:
			return
		case <-tick.C:
		}
		err := ls.renewOnce(every)
		switch {
		case err == nil:
			lastOK = time.Now()
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound):
			ls.lost(err)
			return
		case time.Since(lastOK) >= ls.l.ttl:
			// The server has aged the key out by now, or will before we reach it.
			ls.lost(err)
			return
		default:
			ls.l.logger.Warn("lease renewal failed; retrying", zap.String("lease", ls.key), zap.Error(err))
		}
	}
}

func (ls *lease) renewOnce(timeout time.Duration) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.value.Renewed = ls.l.now().UTC()
	data, err := json.Marshal(ls.value)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rev, err := ls.l.kv.Update(ctx, ls.key, data, ls.rev)
	if err != nil {
		return err
	}
	ls.rev = rev
	return nil
}

func (ls *lease) lost(err error) {
	ls.l.logger.Error("namespace lease lost; stopping the run", zap.String("lease", ls.key), zap.Error(err))
	ls.l.metrics.leaseLost()
	ls.cancel(fmt.Errorf("%w: %s: %w", ErrLeaseLost, ls.key, err))
}

// release stops renewing and deletes the key if it is still ours. It returns the
// ErrLeaseLost cause if the lease was lost while held: the work done under it may
// have overlapped another owner's and must be reported as failed.
func (ls *lease) release(ctx context.Context) error {
	close(ls.stop)
	<-ls.done
	if cause := context.Cause(ls.ctx); errors.Is(cause, ErrLeaseLost) {
		return cause
	}
	ls.cancel(nil)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ls.l.ttl)
	defer cancel()
	ls.mu.Lock()
	rev := ls.rev
	ls.mu.Unlock()
	if err := ls.l.kv.Delete(ctx, ls.key, jetstream.LastRevision(rev)); err != nil {
		// Taken over or unreachable: either way the key ages out on its own.
		ls.l.logger.Warn("lease release failed; it expires after the TTL", zap.String("lease", ls.key), zap.Error(err))
	}
	return nil
}
