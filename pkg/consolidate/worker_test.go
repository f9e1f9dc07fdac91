package consolidate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/pipeline"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// startWorker runs a consolidator Worker on env until the test ends.
func (e *testEnv) startWorker(t testing.TB, r *consolidate.Runner, cfg consolidate.WorkerConfig) {
	t.Helper()
	dial := pipeline.Dialer(func(name string) (*nats.Conn, error) {
		return nats.Connect("", nats.InProcessServer(e.srv), nats.Name(name))
	})
	cfg.Router.Retry = bus.RetryConfig{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond}
	w, err := consolidate.NewWorker(cfg, consolidate.WorkerDeps{Dial: dial, JS: e.js, Runner: r}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker run: %v", err)
		}
	})
	bustest.Eventually(t, wait, func() error { return w.Ready(ctx) })
}

// waitConsumed waits until the consolidator's durable has acknowledged everything.
func (e *testEnv) waitConsumed(t testing.TB) {
	t.Helper()
	bustest.Eventually(t, wait, func() error { return e.consumed(testCtx(t)) })
}

// consumed says what the consolidator's durable has not acknowledged yet.
func (e *testEnv) consumed(ctx context.Context) error {
	return bustest.Settled(ctx, e.js, bus.DefaultStream, "agentmem-consolidator")
}

// End to end over the stream: consolidate_requested merges, memory_hit counts
// once even when the event is stored twice, memory_written makes the timer
// consolidate that namespace (and only a written one).
func TestWorkerEndToEnd(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, "worker-1", nil)
	e.startWorker(t, r, consolidate.WorkerConfig{Interval: 100 * time.Millisecond})

	e.episode(t, user, "c1", base, student)
	e.episode(t, user, "c2", base.Add(72*time.Hour), student)
	req := events.New(events.TypeConsolidateRequested, tenant, user, "", "")
	publish(t, e.js, req)
	var merged vectorstore.Record
	bustest.Eventually(t, wait, func() error {
		eps := e.records(t, user, vectorstore.Episodic)
		if len(eps) != 1 {
			return fmt.Errorf("%d episodes", len(eps))
		}
		merged = eps[0]
		return nil
	})

	hit := hitEvent(user, "where do I study?", merged.ID)
	publish(t, e.js, hit)
	// The same event stored a second time (a producer retry outside the duplicate
	// window): it is delivered again and must not count again.
	data, err := json.Marshal(hit)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := hit.Subject()
	if _, err := e.js.Publish(testCtx(t), subject, data); err != nil {
		t.Fatal(err)
	}
	e.waitConsumed(t)
	if got := e.get(t, user, merged.ID); got.HitCount != 1 {
		t.Errorf("hit_count %d after one hit event delivered twice, want 1", got.HitCount)
	}

	// u3 has duplicates but no memory_written: the timer leaves it alone.
	e.episode(t, "u3", "c1", base, student)
	e.episode(t, "u3", "c2", base.Add(time.Hour), student)
	e.episode(t, "u2", "c1", base, student)
	e.episode(t, "u2", "c2", base.Add(time.Hour), student)
	written := events.New(events.TypeMemoryWritten, tenant, "u2", "", "")
	written.MemoryWritten = &events.MemoryWritten{MemoryIDs: []string{"x1"}}
	publish(t, e.js, written)
	// The merge is visible before the run ends; the run's stamp is saved last.
	bustest.Eventually(t, wait, func() error {
		if n := len(e.records(t, "u2", vectorstore.Episodic)); n != 1 {
			return fmt.Errorf("u2 has %d episodes", n)
		}
		if last, err := r.LastRun(testCtx(t), tenant, "u2"); err != nil || last.IsZero() {
			return fmt.Errorf("u2 last run %s, %v", last, err)
		}
		return nil
	})
	if n := len(e.records(t, "u3", vectorstore.Episodic)); n != 2 {
		t.Errorf("u3 (never written) has %d episodes; the timer must not have consolidated it", n)
	}
	// The timer asked on the stream (a replay reproduces it), once per write however
	// many passes ran.
	timed := 0
	for _, env := range bustest.StreamEvents(t, e.js, "mem."+tenant+".consolidate.u2") {
		if env.ConsolidateRequested != nil && env.ConsolidateRequested.Reason == consolidate.TimerReason {
			timed++
		}
	}
	if timed != 1 {
		t.Errorf("the timer's consolidation of u2 is %d consolidate_requested events on the stream, want 1", timed)
	}
	dls, err := bus.ListDeadLetters(testCtx(t), e.js, bus.DefaultDLQStream, 10)
	if err != nil || len(dls) != 0 {
		t.Errorf("dead letters %v, %v; want none", dls, err)
	}
}

// A hit arriving while another owner holds the namespace waits for the lease
// and is applied once it is free, not dead-lettered.
func TestWorkerWaitsForAHeldLease(t *testing.T) {
	e := newEnv(t)
	const ttl = 500 * time.Millisecond
	r := e.runner(t, "worker-1", func(c *consolidate.RunnerConfig, _ *consolidate.RunnerDeps) { c.LeaseTTL = ttl })
	ep := e.episode(t, user, "c1", base, student)
	kv, err := e.js.KeyValue(testCtx(t), consolidate.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(testCtx(t), tenant+"."+user, []byte(`{"owner":"crashed"}`)); err != nil {
		t.Fatal(err)
	}
	e.startWorker(t, r, consolidate.WorkerConfig{Router: bus.RouterConfig{Retry: bus.RetryConfig{MaxRetries: -1}}})
	publish(t, e.js, hitEvent(user, "q", ep.ID))
	bustest.Eventually(t, wait, func() error {
		if got := e.get(t, user, ep.ID); got.HitCount != 1 {
			return fmt.Errorf("hit_count %d", got.HitCount)
		}
		return nil
	})
	dls, err := bus.ListDeadLetters(testCtx(t), e.js, bus.DefaultDLQStream, 10)
	if err != nil || len(dls) != 0 {
		t.Errorf("dead letters %v, %v; want none", dls, err)
	}
}

// gatedSweeper is the real sweeper, holding every call until open is closed and
// recording how many calls were in progress at once (one call per run).
type gatedSweeper struct {
	consolidate.Sweeper
	open          chan struct{}
	mu            sync.Mutex
	now, max, all int
}

func (s *gatedSweeper) SweepExpired(ctx context.Context, tenant, userID string) (int, error) {
	s.mu.Lock()
	s.now++
	s.all++
	s.max = max(s.max, s.now)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	select {
	case <-s.open:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Sweeper.SweepExpired(ctx, tenant, userID)
}

// Requested runs of different namespaces, all delivered at once, run at most
// MaxRuns at a time; the others wait for a token and still run.
func TestWorkerBoundsRequestedRuns(t *testing.T) {
	const requests, maxRuns = 6, 2
	e := newEnv(t)
	sweeper := &gatedSweeper{Sweeper: e.mem, open: make(chan struct{})}
	r := e.runner(t, "worker-1", func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { d.Sweeper = sweeper })
	e.startWorker(t, r, consolidate.WorkerConfig{MaxRuns: maxRuns})
	var release sync.Once
	openGate := func() { release.Do(func() { close(sweeper.open) }) }
	t.Cleanup(openGate) // before the worker stops, should the test fail early
	for i := range requests {
		publish(t, e.js, events.New(events.TypeConsolidateRequested, tenant, fmt.Sprintf("u%d", i), "", ""))
	}
	bustest.Eventually(t, wait, func() error {
		sweeper.mu.Lock()
		running := sweeper.now
		sweeper.mu.Unlock()
		cons, err := e.js.Consumer(testCtx(t), bus.DefaultStream, "agentmem-consolidator")
		if err != nil {
			return err
		}
		info, err := cons.Info(testCtx(t))
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != requests {
			return fmt.Errorf("not every request is in a handler yet: %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		if running != maxRuns {
			return fmt.Errorf("%d runs in progress, want %d", running, maxRuns)
		}
		return nil
	})
	openGate()
	e.waitConsumed(t)
	sweeper.mu.Lock()
	defer sweeper.mu.Unlock()
	if sweeper.max != maxRuns || sweeper.all != requests {
		t.Errorf("%d runs, at most %d at once; want %d, at most %d", sweeper.all, sweeper.max, requests, maxRuns)
	}
}

func TestWorkerConfigValidate(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, "", nil)
	dial := pipeline.Dialer(func(string) (*nats.Conn, error) { return nil, errors.New("unused") })
	for name, tc := range map[string]struct {
		cfg  consolidate.WorkerConfig
		deps consolidate.WorkerDeps
	}{
		"negative interval": {consolidate.WorkerConfig{Interval: -time.Second}, consolidate.WorkerDeps{Dial: dial, JS: e.js, Runner: r}},
		"bad bucket":        {consolidate.WorkerConfig{NamespacesBucket: "a b"}, consolidate.WorkerDeps{Dial: dial, JS: e.js, Runner: r}},
		"negative max runs": {consolidate.WorkerConfig{MaxRuns: -1}, consolidate.WorkerDeps{Dial: dial, JS: e.js, Runner: r}},
		"no runner":         {consolidate.WorkerConfig{}, consolidate.WorkerDeps{Dial: dial, JS: e.js}},
	} {
		if _, err := consolidate.NewWorker(tc.cfg, tc.deps, nil); !errors.Is(err, consolidate.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}
