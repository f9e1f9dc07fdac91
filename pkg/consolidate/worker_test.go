package consolidate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
func (e *testEnv) startWorker(t *testing.T, r *consolidate.Runner, cfg consolidate.WorkerConfig) {
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
func (e *testEnv) waitConsumed(t *testing.T) {
	t.Helper()
	bustest.Eventually(t, wait, func() error {
		info, err := e.js.Consumer(testCtx(t), bus.DefaultStream, "agentmem-consolidator")
		if err != nil {
			return err
		}
		ci, err := info.Info(testCtx(t))
		if err != nil {
			return err
		}
		if ci.NumPending != 0 || ci.NumAckPending != 0 {
			return fmt.Errorf("%d pending, %d unacknowledged", ci.NumPending, ci.NumAckPending)
		}
		return nil
	})
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
		"no runner":         {consolidate.WorkerConfig{}, consolidate.WorkerDeps{Dial: dial, JS: e.js}},
	} {
		if _, err := consolidate.NewWorker(tc.cfg, tc.deps, nil); !errors.Is(err, consolidate.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}
