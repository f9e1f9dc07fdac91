package consolidate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/pipeline"
)

// Defaults of WorkerConfig.
const (
	DefaultInterval         = 10 * time.Minute
	DefaultNamespacesBucket = "agentmem_namespaces"
	DefaultLeaseWait        = 20 * time.Second
	DefaultLeasePoll        = 100 * time.Millisecond
	// DefaultConcurrency is high because memory_hit events of one namespace in
	// flight together are applied as one batch (see hitBatcher), and a batch costs
	// about the same whatever its number of events: the in-flight cap is the batch
	// size cap. With 32, a burst of 1,000 context requests took 32 batches and
	// ~10 s to apply (BenchmarkWorkerHitBurst), 5x the CPU of 4 batches of 256.
	// A waiting event costs a goroutine; heavy runs are bounded by MaxRuns.
	DefaultConcurrency = 256
	DefaultMaxRuns     = 4
	DefaultHitLinger   = 250 * time.Millisecond
)

// WorkerConfig configures the consolidator Worker. Zero fields take the defaults
// noted.
type WorkerConfig struct {
	// Consumer is the durable; default bus.WorkerConsumer(bus.WorkerConsolidator, defaults).
	Consumer bus.ConsumerSpec
	// Concurrency is how many events one replica handles at once; default
	// DefaultConcurrency.
	Concurrency int
	// MaxRuns is how many consolidate_requested runs one replica does at once
	// (each for its own namespace); default DefaultMaxRuns. Further requests wait
	// in their handlers, so a burst of requests cannot start Concurrency runs.
	MaxRuns int
	// Router configures retries and the per-attempt timeout of a handler.
	Router bus.RouterConfig
	// Limits bound each event the worker consumes (events.Admit).
	Limits events.Limits
	// Interval between timer passes over the dirty namespaces; default 10m.
	Interval time.Duration
	// NamespacesBucket records each namespace's last write; default
	// "agentmem_namespaces".
	NamespacesBucket string
	// LeaseWait is how long a hit or consolidate event waits for a namespace whose
	// lease is held before the attempt fails and is retried by the Router; default
	// 20s. Keep it below Router.HandlerTimeout, which also bounds the wait.
	LeaseWait time.Duration
	// LeasePoll is the pause between lease attempts while waiting (jittered);
	// default 100ms.
	LeasePoll time.Duration
	// HitLinger is how long a namespace's batch of memory_hit events stays open
	// for more events before it is applied; default 250ms. Context requests each
	// publish one hit, so without it a busy namespace is updated (read, write,
	// history, reconsolidation) once per request; with it, once per linger for all
	// of them. Counting a use a quarter of a second late costs nothing; rewriting a
	// hot memory hundreds of times a second takes the CPU from the requests.
	HitLinger time.Duration
}

func (c *WorkerConfig) setDefaults() {
	if c.Consumer.Durable == "" {
		c.Consumer = bus.WorkerConsumer(bus.WorkerConsolidator, bus.ConsumerDefaults{})
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.NamespacesBucket == "" {
		c.NamespacesBucket = DefaultNamespacesBucket
	}
	if c.LeaseWait == 0 {
		c.LeaseWait = DefaultLeaseWait
	}
	if c.LeasePoll == 0 {
		c.LeasePoll = DefaultLeasePoll
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxRuns == 0 {
		c.MaxRuns = DefaultMaxRuns
	}
	if c.HitLinger == 0 {
		c.HitLinger = DefaultHitLinger
	}
}

// Validate reports what is wrong with the configuration (after defaults), naming
// the field. The consumer and router are checked by pipeline.New.
func (c WorkerConfig) Validate() error {
	if err := events.ValidateID("NamespacesBucket", c.NamespacesBucket); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.Interval < 0:
		return fmt.Errorf("%w: Interval is %s, want > 0", ErrInvalidConfig, c.Interval)
	case c.LeaseWait < 0:
		return fmt.Errorf("%w: LeaseWait is %s, want >= 0", ErrInvalidConfig, c.LeaseWait)
	case c.LeasePoll < 0:
		return fmt.Errorf("%w: LeasePoll is %s, want > 0", ErrInvalidConfig, c.LeasePoll)
	case c.HitLinger < 0:
		return fmt.Errorf("%w: HitLinger is %s, want > 0", ErrInvalidConfig, c.HitLinger)
	case c.Concurrency < 0:
		return fmt.Errorf("%w: Concurrency is %d, want >= 0", ErrInvalidConfig, c.Concurrency)
	case c.MaxRuns < 0:
		return fmt.Errorf("%w: MaxRuns is %d, want >= 0", ErrInvalidConfig, c.MaxRuns)
	}
	return nil
}

// WorkerDeps are the parts the Worker uses; all but Metrics and Compactor are
// required.
type WorkerDeps struct {
	Dial    pipeline.Dialer
	JS      jetstream.JetStream // the namespaces bucket
	Runner  *Runner
	Metrics *obs.Metrics
	// Compactor, when set, is asked after every memory_written event that wrote
	// MEMORY.md whether the file is due for long-term compression (SPEC B4).
	Compactor Compactor
}

// Compactor compresses MEMORY.md when it is due (lifecycle.Compactor).
type Compactor interface {
	Maybe(ctx context.Context, ns docstore.Namespace) (events.CompressReply, error)
}

// Worker is the consolidator stream worker: it applies memory hits, runs
// requested consolidations, and consolidates namespaces with new writes on a
// timer (see the package doc).
type Worker struct {
	cfg    WorkerConfig
	deps   WorkerDeps
	pw     *pipeline.Worker
	logger *zap.Logger
	dirty  jetstream.KeyValue // set by Run before any handler runs
	hits   hitBatcher
	runs   chan struct{} // a token per consolidate_requested run in progress
}

// NewWorker returns a Worker; nothing connects before Run. logger names the worker
// already (app.Runtime.Component adds obs.Worker once, for every component).
func NewWorker(cfg WorkerConfig, deps WorkerDeps, logger *zap.Logger) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Dial == nil || deps.JS == nil || deps.Runner == nil {
		return nil, fmt.Errorf("%w: WorkerDeps.Dial, JS and Runner are required", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	w := &Worker{cfg: cfg, deps: deps, logger: logger, runs: make(chan struct{}, cfg.MaxRuns)}
	w.hits.linger = cfg.HitLinger
	w.hits.apply = func(ctx context.Context, tenant, userID string, hits []events.Envelope) error {
		return w.waitLease(ctx, func() error { return deps.Runner.ApplyHits(ctx, tenant, userID, hits...) })
	}
	pw, err := pipeline.New(pipeline.Config{
		Worker:      bus.WorkerConsolidator,
		Consumer:    cfg.Consumer,
		Concurrency: cfg.Concurrency,
		Router:      cfg.Router,
		Dial:        deps.Dial,
		Metrics:     deps.Metrics,
		Limits:      cfg.Limits,
	}, w.handle, logger)
	if err != nil {
		return nil, err
	}
	w.pw = pw
	return w, nil
}

// Run consumes events and runs the timer until ctx ends, then drains and returns
// nil; an error means it could not start.
func (w *Worker) Run(ctx context.Context) error {
	kv, err := kvcas.EnsureKV(ctx, w.deps.JS, jetstream.KeyValueConfig{
		Bucket:      w.cfg.NamespacesBucket,
		Description: "agentmem namespaces with their last memory write",
		History:     1,
	})
	if err != nil {
		return fmt.Errorf("consolidate: %w", err)
	}
	w.dirty = kv
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timerDone := make(chan struct{})
	go func() {
		defer close(timerDone)
		w.timer(ctx)
	}()
	err = w.pw.Run(ctx)
	cancel()
	<-timerDone
	return err
}

// Ready reports whether the worker consumes, for /readyz.
func (w *Worker) Ready(ctx context.Context) error { return w.pw.Ready(ctx) }

func (w *Worker) handle(ctx context.Context, env events.Envelope) error {
	var err error
	switch env.Type {
	case events.TypeMemoryHit:
		err = w.hits.do(ctx, env)
	case events.TypeMemoryWritten:
		err = w.markDirty(ctx, env.Tenant, env.UserID)
		if err == nil {
			err = w.compressIfDue(ctx, env)
		}
	case events.TypeConsolidateRequested:
		err = w.consolidateRequested(ctx, env.Tenant, env.UserID)
	default:
		err = fmt.Errorf("%w: %s event on a consolidator subject", ErrInvalidInput, env.Type)
	}
	if errors.Is(err, ErrInvalidInput) {
		return bus.Permanent(err)
	}
	return err
}

// compressIfDue runs the long-term compression check after a write to
// MEMORY.md. Its failure is logged, not retried: the next write asks again, and
// a redelivered memory_written event must not compress twice (the 24 h stamp
// sees to that anyway).
func (w *Worker) compressIfDue(ctx context.Context, env events.Envelope) error {
	if w.deps.Compactor == nil || env.MemoryWritten == nil {
		return nil
	}
	wrote := false
	for _, e := range env.MemoryWritten.Entries {
		wrote = wrote || e.File == docstore.MemoryFile
	}
	if !wrote {
		return nil
	}
	if _, err := w.deps.Compactor.Maybe(ctx, docstore.Namespace{Tenant: env.Tenant, User: env.UserID}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.logger.Warn("long-term compression failed; the next write tries again", obs.Tenant(env.Tenant), obs.User(env.UserID), zap.Error(err))
	}
	return nil
}

// consolidateRequested runs Consolidate for the namespace once one of the MaxRuns
// run tokens is free.
func (w *Worker) consolidateRequested(ctx context.Context, tenant, userID string) error {
	select {
	case w.runs <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-w.runs }()
	return w.waitLease(ctx, func() error {
		_, err := w.deps.Runner.Consolidate(ctx, tenant, userID)
		return err
	})
}

// waitLease calls fn until it does not fail with ErrLeaseHeld, for at most
// LeaseWait (and the handler's deadline); then the last error is returned and the
// Router retries the event.
func (w *Worker) waitLease(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(w.cfg.LeaseWait)
	for {
		err := fn()
		if !errors.Is(err, ErrLeaseHeld) || !time.Now().Before(deadline) {
			return err
		}
		// Jitter keeps waiting replicas from retrying in lockstep.
		t := time.NewTimer(w.cfg.LeasePoll/2 + rand.N(w.cfg.LeasePoll/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// dirtyMark is the value of a namespace in the namespaces bucket.
type dirtyMark struct {
	LastWrite time.Time `json:"last_write"`
}

// markDirty records that the namespace was written now; the value never moves
// back, whichever replica writes last.
func (w *Worker) markDirty(ctx context.Context, tenant, userID string) error {
	now := w.deps.Runner.deps.Now().UTC()
	_, err := kvcas.UpdateKV(ctx, w.dirty, namespaceKey(tenant, userID), 0, func(old []byte, exists bool) ([]byte, error) {
		var m dirtyMark
		if exists && json.Unmarshal(old, &m) == nil && m.LastWrite.After(now) {
			return old, nil
		}
		return json.Marshal(dirtyMark{LastWrite: now})
	})
	if err != nil {
		return fmt.Errorf("consolidate: mark %s/%s written: %w", tenant, userID, err)
	}
	return nil
}

func (w *Worker) timer(ctx context.Context) {
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.consolidateDirty(ctx)
		}
	}
}

// namespaceMark is a dirty namespace read from the bucket.
type namespaceMark struct {
	tenant, userID string
	lastWrite      time.Time
}

// consolidateDirty asks for a consolidation of every namespace written since its
// last run, as a consolidate_requested event (reason "timer") that the workers
// consume like any other: the stream then holds every consolidation, so a replay
// reproduces it in place. The event's Nats-Msg-Id is the namespace's last write,
// so the timers of several replicas ask once. Failures are logged; the namespace
// stays dirty, so the next pass asks again.
func (w *Worker) consolidateDirty(ctx context.Context) {
	marks, err := w.dirtyNamespaces(ctx)
	if err != nil {
		w.logger.Warn("could not list namespaces to consolidate", zap.Error(err))
		return
	}
	for _, m := range marks {
		if ctx.Err() != nil {
			return
		}
		log := w.logger.With(obs.Tenant(m.tenant), obs.User(m.userID))
		last, err := w.deps.Runner.LastRun(ctx, m.tenant, m.userID)
		if err != nil {
			log.Warn("could not read the last consolidation run", zap.Error(err))
			continue
		}
		if !m.lastWrite.After(last) {
			continue
		}
		if err := w.requestConsolidation(ctx, m); err != nil && ctx.Err() == nil {
			log.Warn("could not ask for a timed consolidation; the next pass asks again", zap.Error(err))
		}
	}
}

// TimerReason is the reason of the consolidate_requested events the timer publishes.
const TimerReason = "timer"

func (w *Worker) requestConsolidation(ctx context.Context, m namespaceMark) error {
	env := events.New(events.TypeConsolidateRequested, m.tenant, m.userID, bus.WorkerConsolidator, "")
	env.ConsolidateRequested = &events.ConsolidateRequested{Reason: TimerReason}
	msg, err := eventstore.Msg(env)
	if err != nil {
		return err
	}
	msg.Header.Set(events.HeaderMsgID, "timer-"+namespaceKey(m.tenant, m.userID)+"-"+strconv.FormatInt(m.lastWrite.UnixNano(), 10))
	pubCtx, cancel := kvcas.WithRequestTimeout(ctx)
	defer cancel()
	_, err = w.deps.JS.PublishMsg(pubCtx, msg)
	return kvcas.NoReply(ctx, err)
}

// dirtyNamespaces reads every namespace mark in the bucket.
func (w *Worker) dirtyNamespaces(ctx context.Context) ([]namespaceMark, error) {
	watcher, err := w.dirty.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = watcher.Stop() }()
	var marks []namespaceMark
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e := <-watcher.Updates():
			if e == nil { // every current value has been delivered
				return marks, nil
			}
			tenant, userID, _ := strings.Cut(e.Key(), ".")
			var m dirtyMark
			if validateNamespace(tenant, userID) != nil || json.Unmarshal(e.Value(), &m) != nil {
				w.logger.Warn("ignoring a malformed namespace mark", zap.String("key", e.Key()))
				continue
			}
			marks = append(marks, namespaceMark{tenant: tenant, userID: userID, lastWrite: m.LastWrite})
		}
	}
}
