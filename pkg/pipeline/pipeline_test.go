package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/pipeline"
)

func dialer(srv *server.Server) pipeline.Dialer {
	return func(name string) (*nats.Conn, error) {
		return nats.Connect("", nats.InProcessServer(srv), nats.Name(name))
	}
}

// testConfig is a worker on the observations whose retries come at once.
func testConfig(srv *server.Server, worker string) pipeline.Config {
	spec := bus.WorkerConsumer("ingest", bus.ConsumerDefaults{})
	spec.Durable = "test-" + worker
	return pipeline.Config{
		Worker:   worker,
		Consumer: spec,
		Dial:     dialer(srv),
		Router:   bus.RouterConfig{Retry: bus.RetryConfig{InitialInterval: time.Millisecond}},
	}
}

func startWorker(t *testing.T, srv *server.Server, worker string, h pipeline.Handler) {
	t.Helper()
	w, err := pipeline.New(testConfig(srv, worker), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
}

// run runs w until the test ends, once it consumes.
func run(t testing.TB, w *pipeline.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Running():
	case err := <-done:
		cancel()
		t.Fatalf("worker stopped before consuming: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("worker did not start")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker run: %v", err)
		}
	})
}

func publish(t *testing.T, js jetstream.JetStream, subject string, data []byte) {
	t.Helper()
	if _, err := js.Publish(context.Background(), subject, data); err != nil {
		t.Fatal(err)
	}
}

func observation(session, text string) ([]byte, string) {
	env := events.New(events.TypeObservation, "acme", "u1", "bot", session)
	env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
	data, _ := json.Marshal(env)
	subj, _ := env.Subject()
	return data, subj
}

func deadLetters(t *testing.T, js jetstream.JetStream, want int) []bus.DeadLetter {
	t.Helper()
	var dls []bus.DeadLetter
	bustest.Eventually(t, 10*time.Second, func() error {
		var err error
		dls, err = bus.ListDeadLetters(context.Background(), js, bus.DefaultDLQStream, 100)
		if err != nil {
			return err
		}
		if len(dls) != want {
			return fmt.Errorf("%d dead letters, want %d", len(dls), want)
		}
		return nil
	})
	return dls
}

// Malformed input, an unknown schema version and an event on a subject that is not its
// own are dead-lettered with their reason after one attempt; valid events around them
// are processed, and a transient handler error is retried and applied once.
func TestWorkerDeadLettersBadInputAndRetries(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	var (
		mu      sync.Mutex
		applied = map[string]int{}
		calls   atomic.Int32
		failed  atomic.Bool
	)
	startWorker(t, srv, "ingest", func(ctx context.Context, env events.Envelope) error {
		calls.Add(1)
		if env.Observation.Text == "flaky" && failed.CompareAndSwap(false, true) {
			return errors.New("transient")
		}
		mu.Lock()
		applied[env.Observation.Text]++
		mu.Unlock()
		return nil
	})

	good, subj := observation("s1", "hello")
	flaky, _ := observation("s1", "flaky")
	publish(t, js, "mem.acme.obs.u1.s1", []byte("{not json"))
	publish(t, js, "mem.acme.obs.u1.s1", []byte(`{"schema_version":99,"type":"observation"}`))
	publish(t, js, "mem.acme.obs.u1.other", good) // body says session s1
	publish(t, js, subj, good)
	publish(t, js, subj, flaky)

	dls := deadLetters(t, js, 3)
	// The reasons start with the contract's documented prefixes (events/README.md).
	var prefixes []string
	for _, dl := range dls {
		if dl.Worker != "ingest" || dl.Subject == "" || dl.Deliveries != 1 || dl.Class != bus.ClassMalformed {
			t.Errorf("dead letter = %+v; want worker ingest, the subject, 1 delivery and class malformed", dl)
		}
		prefixes = append(prefixes, dl.Reason[:strings.IndexByte(dl.Reason, ':')+1])
	}
	slices.Sort(prefixes)
	if want := []string{"invalid event:", "malformed event:", "unknown schema_version:"}; !slices.Equal(prefixes, want) {
		t.Errorf("reasons start with %q, want %q", prefixes, want)
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if applied["hello"] != 1 || applied["flaky"] != 1 {
			return fmt.Errorf("applied = %v", applied)
		}
		return nil
	})
	if got := calls.Load(); got != 3 {
		t.Fatalf("handler calls = %d, want 3 (hello, flaky twice); malformed input must not reach it", got)
	}
}
