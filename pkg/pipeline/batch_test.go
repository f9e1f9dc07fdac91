package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/pipeline"
)

// batchRecorder is a BatchHandler's memory: what each event's committed batches
// applied, and the largest batch seen.
type batchRecorder struct {
	mu      sync.Mutex
	applied map[string]int // text → times committed
	largest int
}

func newRecorder() *batchRecorder { return &batchRecorder{applied: map[string]int{}} }

func (r *batchRecorder) commit(envs []events.Envelope, errs []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.largest = max(r.largest, len(envs))
	for i, env := range envs {
		if errs == nil || errs[i] == nil {
			r.applied[env.Observation.Text]++
		}
	}
}

func (r *batchRecorder) wait(t *testing.T, texts []string) {
	t.Helper()
	bustest.Eventually(t, 10*time.Second, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, text := range texts {
			if r.applied[text] != 1 {
				return fmt.Errorf("%q applied %d times", text, r.applied[text])
			}
		}
		return nil
	})
}

func startBatchWorker(t testing.TB, srv *server.Server, worker string, bc pipeline.BatchConfig, h pipeline.BatchHandler) {
	t.Helper()
	w, err := pipeline.NewBatch(testConfig(srv, worker), bc, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
}

// publishTexts publishes one observation per text (session s1 of u1) without waiting
// for each ack, so that they are in the stream together and are fetched together.
func publishTexts(t *testing.T, js jetstream.JetStream, texts []string) {
	t.Helper()
	for _, text := range texts {
		data, subj := observation("s1", text)
		if _, err := js.PublishAsync(subj, data); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
}

func texts(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// A permanent error of one event dead-letters that event alone; the others of its
// batch are committed once.
func TestBatchPermanentErrorDeadLettersOnlyItsEvent(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	rec := newRecorder()
	startBatchWorker(t, srv, "ingest", pipeline.BatchConfig{MaxSize: 16, Linger: 50 * time.Millisecond},
		func(_ context.Context, envs []events.Envelope) []error {
			errs := make([]error, len(envs))
			for i, env := range envs {
				if env.Observation.Text == "poison" {
					errs[i] = bus.Permanent(errors.New("cannot be stored"))
				}
			}
			rec.commit(envs, errs)
			return errs
		})
	good := texts(15, "good")
	publishTexts(t, js, append(good[:7:7], append([]string{"poison"}, good[7:]...)...))

	rec.wait(t, good)
	dls := deadLetters(t, js, 1)
	if !strings.Contains(dls[0].Reason, "cannot be stored") || dls[0].Deliveries != 1 {
		t.Fatalf("dead letter = %+v, want the poison event after one delivery", dls[0])
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.largest < 2 {
		t.Fatalf("largest batch = %d: the events were never handled together", rec.largest)
	}
}

// The batch's leader decodes its members: a malformed message among valid ones is
// dead-lettered alone, never reaches the handler, and the rest are committed once.
func TestBatchMalformedMessageDeadLettersOnlyItself(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	rec := newRecorder()
	startBatchWorker(t, srv, "ingest", pipeline.BatchConfig{MaxSize: 16, Linger: 50 * time.Millisecond},
		func(_ context.Context, envs []events.Envelope) []error {
			rec.commit(envs, nil)
			return nil
		})
	good := texts(6, "good")
	publishTexts(t, js, good[:3])
	if _, err := js.PublishAsync("mem.acme.obs.u1.s1", []byte(`{"schema_version":1,"type":"observation"`)); err != nil {
		t.Fatal(err)
	}
	publishTexts(t, js, good[3:])

	rec.wait(t, good)
	dls := deadLetters(t, js, 1)
	if dls[0].Subject != "mem.acme.obs.u1.s1" || !strings.Contains(dls[0].Reason, "malformed") || dls[0].Deliveries != 1 {
		t.Fatalf("dead letter = %+v, want the malformed message after one delivery", dls[0])
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.applied) != len(good) {
		t.Fatalf("handler saw %d distinct events %v, want the %d valid ones", len(rec.applied), rec.applied, len(good))
	}
}

// A batch that fails as a whole is retried; every event ends up committed exactly
// once, and none is dead-lettered.
func TestBatchTransientErrorIsRetriedAndAppliedOnce(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	rec := newRecorder()
	var failed atomic.Bool
	startBatchWorker(t, srv, "ingest", pipeline.BatchConfig{MaxSize: 8, Linger: 20 * time.Millisecond},
		func(_ context.Context, envs []events.Envelope) []error {
			if failed.CompareAndSwap(false, true) {
				errs := make([]error, len(envs))
				for i := range errs {
					errs[i] = errors.New("store unavailable")
				}
				return errs
			}
			rec.commit(envs, nil)
			return nil
		})
	all := texts(20, "ev")
	publishTexts(t, js, all)
	rec.wait(t, all)
	if dls, err := bus.ListDeadLetters(context.Background(), js, bus.DefaultDLQStream, 10); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters %+v (%v), want none", dls, err)
	}
}

// No message is acked before its batch returns: while the handler holds the batch,
// every message of it is still pending acknowledgement; once it returns, all are
// acked.
func TestBatchAcksOnlyAfterTheHandlerReturns(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	const n = 6
	entered := make(chan int, 1)
	release := make(chan struct{})
	startBatchWorker(t, srv, "ingest", pipeline.BatchConfig{MaxSize: n, Linger: 10 * time.Second},
		func(ctx context.Context, envs []events.Envelope) []error {
			entered <- len(envs)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return fill(len(envs), ctx.Err())
			}
		})
	publishTexts(t, js, texts(n, "held"))
	if got := <-entered; got != n {
		t.Fatalf("batch of %d, want %d: a full batch goes at once", got, n)
	}
	cons, err := js.Consumer(context.Background(), bus.DefaultStream, "test-ingest")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != n || info.AckFloor.Stream != 0 {
		t.Fatalf("while the batch is handled: %d pending acks, ack floor %d; want %d and 0", info.NumAckPending, info.AckFloor.Stream, n)
	}
	close(release)
	bustest.Eventually(t, 10*time.Second, func() error {
		info, err := cons.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumAckPending != 0 || info.AckFloor.Stream != n {
			return fmt.Errorf("%d pending acks, ack floor %d", info.NumAckPending, info.AckFloor.Stream)
		}
		return nil
	})
}

// A panicking batch handler fails its events (they are retried) instead of leaving
// the other members of the batch waiting.
func TestBatchHandlerPanicIsRetried(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	rec := newRecorder()
	var panicked atomic.Bool
	startBatchWorker(t, srv, "ingest", pipeline.BatchConfig{MaxSize: 4, Linger: 20 * time.Millisecond},
		func(_ context.Context, envs []events.Envelope) []error {
			if panicked.CompareAndSwap(false, true) {
				panic("boom")
			}
			rec.commit(envs, nil)
			return nil
		})
	all := texts(4, "p")
	publishTexts(t, js, all)
	rec.wait(t, all)
}

func TestBatchConfigValidate(t *testing.T) {
	srv, _, _ := bustest.Provisioned(t)
	h := func(context.Context, []events.Envelope) []error { return nil }
	for _, bc := range []pipeline.BatchConfig{{MaxSize: -1}, {Linger: -time.Millisecond}} {
		if _, err := pipeline.NewBatch(testConfig(srv, "ingest"), bc, h, nil); !errors.Is(err, pipeline.ErrInvalidConfig) {
			t.Errorf("NewBatch(%+v) = %v, want ErrInvalidConfig", bc, err)
		}
	}
	small := testConfig(srv, "ingest")
	small.Concurrency = 8
	if _, err := pipeline.NewBatch(small, pipeline.BatchConfig{MaxSize: 16}, h, nil); !errors.Is(err, pipeline.ErrInvalidConfig) {
		t.Errorf("Concurrency below MaxSize: %v, want ErrInvalidConfig", err)
	}
	if _, err := pipeline.NewBatch(testConfig(srv, "ingest"), pipeline.BatchConfig{}, nil, nil); !errors.Is(err, pipeline.ErrInvalidConfig) {
		t.Errorf("nil handler: %v, want ErrInvalidConfig", err)
	}
}

func fill(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// The next batch claims its ids (and so reaches its handler) only once the
// handler of the batch before it called Started: batches that order themselves
// on entry (ingest's session state) enter in the order they were formed. The
// first handler to run watches, for a while before it calls Started, whether
// the other event is claimed already: it must not be.
func TestNextBatchWaitsForTheHandlerToStart(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	claimed := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	other := map[string]string{"a": "b", "b": "a"}
	var claimOnce sync.Map
	cfg := testConfig(srv, "order")
	cfg.Claim = func(_ context.Context, env events.Envelope, _ string, _ uint64) error {
		if _, done := claimOnce.LoadOrStore(env.Observation.Text, true); !done {
			close(claimed[env.Observation.Text])
		}
		return nil
	}
	var first atomic.Bool
	early := make(chan bool, 1)
	h := func(ctx context.Context, envs []events.Envelope) []error {
		if first.CompareAndSwap(false, true) {
			// A window for the bug to show in, not a synchronisation: with it,
			// the other event is claimed at once.
			select {
			case <-claimed[other[envs[0].Observation.Text]]:
				early <- true
			case <-time.After(300 * time.Millisecond):
				early <- false
			}
		}
		pipeline.Started(ctx)
		return nil
	}
	w, err := pipeline.NewBatch(cfg, pipeline.BatchConfig{MaxSize: 1}, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	publishTexts(t, js, []string{"a", "b"})
	select {
	case e := <-early:
		if e {
			t.Fatal("the second batch was claimed before the first one's handler called Started")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no batch reached its handler")
	}
	for text, c := range claimed {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("%q was never claimed", text)
		}
	}
}
