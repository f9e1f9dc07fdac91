package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/pipeline"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// outageRig is the real stack with its chat model and embedder on a fake endpoint
// and its operations server on ops.
type outageRig struct {
	rig
	ops  string
	logs *observer.ObservedLogs
}

func upWithModel(t *testing.T, m *llmtest.Model) outageRig {
	t.Helper()
	ops := bustest.FreeAddr(t)
	core, logs := observer.New(zapcore.InfoLevel)
	r := upStackLogged(t, zap.New(core), []string{
		"AGENTMEM_HTTP_LISTEN=" + ops,
		"AGENTMEM_LLM_BASE_URL=" + m.URL(),
		"AGENTMEM_LLM_MODEL=fake",
		"AGENTMEM_LLM_API_KEY=sk-test-secret-key",
		"AGENTMEM_LLM_MAX_RETRIES=1",
		"AGENTMEM_LLM_TIMEOUT=5s",
		"AGENTMEM_EMBED_PROVIDER=openai",
		"AGENTMEM_EMBED_BASE_URL=" + m.URL(),
		"AGENTMEM_EMBED_MODEL=fake-embedding",
		"AGENTMEM_EMBED_DIMENSIONS=64",
	}...)
	return outageRig{rig: r, ops: ops, logs: logs}
}

// readyz returns /readyz's status and body.
func (r outageRig) readyz(t *testing.T) (int, string) {
	t.Helper()
	code, body, err := get("http://" + r.ops + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

func (r outageRig) deadLetters(t *testing.T) []bus.DeadLetter {
	t.Helper()
	dls, err := bus.ListDeadLetters(context.Background(), r.stack.Runtime().JS, bus.DefaultDLQStream, 100)
	if err != nil {
		t.Fatal(err)
	}
	return dls
}

func (r outageRig) consumer(t *testing.T, worker string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx := context.Background()
	c, err := r.stack.Runtime().JS.Consumer(ctx, bus.DefaultStream, bus.WorkerConsumer(worker, bus.ConsumerDefaults{}).Durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// Issue 22: a model outage in the middle of a stream, longer than the old ~30 s
// after which every observation and session end was dead-lettered, is waited out:
// /readyz says the model is unavailable, nothing is dead-lettered, no delivery is
// used up, and once the model answers again the memory is complete. (-short
// shortens the outage to 8 s: the mechanism does not depend on its length.)
func TestModelOutageIsWaitedOut(t *testing.T) {
	outage := 40 * time.Second
	if testing.Short() {
		outage = 8 * time.Second
	}
	m := llmtest.NewModel(t)
	r := upWithModel(t, m)
	ctx := context.Background()
	const before, during = 10, 30
	for i := range before {
		r.say(t, "u1", "s1", events.RoleUser, fmt.Sprintf("Remember: item %d is on shelf %d", i, i))
	}
	r.waitIdle(t)
	if code, body := r.readyz(t); code != http.StatusOK {
		t.Fatalf("readyz before the outage: %d %s", code, body)
	}

	m.SetDown(true)
	down := time.Now()
	for i := before; i < before+during; i++ {
		r.say(t, "u1", "s1", events.RoleUser, fmt.Sprintf("Remember: item %d is on shelf %d", i, i))
	}
	if _, err := r.client.EndSession(ctx, "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, func() error {
		if code, body := r.readyz(t); code != http.StatusServiceUnavailable || !strings.Contains(body, "llm: llm endpoint") {
			return fmt.Errorf("readyz during the outage: %d %s", code, body)
		}
		return nil
	})
	for time.Since(down) < outage {
		if dls := r.deadLetters(t); len(dls) > 0 {
			t.Fatalf("dead-lettered during the outage: %+v", dls[0])
		}
		time.Sleep(time.Second) // the outage's length, not a synchronisation
	}
	calls := m.Calls(llmtest.StepDecide) + m.Calls(llmtest.StepDecideBatch)
	m.SetDown(false)
	up := time.Now()
	// The next probe comes at most breaker.Config.MaxOpenFor (30 s) after the
	// model is back; the backlog is done soon after.
	idle, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := app.WaitIdle(idle, r.stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Logf("outage %s: %d decide calls during it (probes and retries); idle %s after the model came back",
		outage.Round(time.Second), calls, time.Since(up).Round(time.Millisecond))
	bustest.Eventually(t, 30*time.Second, func() error {
		if code, body := r.readyz(t); code != http.StatusOK {
			return fmt.Errorf("readyz after the outage: %d %s", code, body)
		}
		return nil
	})

	if dls := r.deadLetters(t); len(dls) != 0 {
		t.Fatalf("%d dead letters, first %+v", len(dls), dls[0])
	}
	for _, w := range []string{bus.WorkerIngest, bus.WorkerExtractor} {
		if info := r.consumer(t, w); info.NumRedelivered != 0 || info.NumAckPending != 0 {
			t.Errorf("%s: %d redelivered, %d ack pending; want 0 (an outage uses up no delivery)", w, info.NumRedelivered, info.NumAckPending)
		}
	}
	n, err := r.stack.Runtime().Vectors.Count(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1", MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}})
	if err != nil || n != before+during {
		t.Fatalf("episodic memories = %d, %v; want %d", n, err, before+during)
	}
	// The extractor may have run during the outage, on the rules (marked so); any
	// way, every item is in the Markdown.
	core := strings.ToLower(r.file(t, "u1", docstore.MemoryFile))
	for _, want := range []string{"item 0 ", fmt.Sprintf("item %d ", before+during-1)} {
		if !strings.Contains(core, want) {
			t.Fatalf("MEMORY.md lacks %q:\n%s", want, core)
		}
	}
}

// Issue 22: a key the model endpoint refuses (401) stops the workers with one
// clear line naming the endpoint and status, never the key; the observations stay
// in the stream, nothing is dead-lettered, and the config error metric counts it.
func TestModelConfigErrorStopsTheWorker(t *testing.T) {
	m := llmtest.NewModel(t)
	r := upWithModel(t, m)
	m.SetStatus(http.StatusUnauthorized)
	const n = 5
	for i := range n {
		r.say(t, "u1", "s1", events.RoleUser, fmt.Sprintf("Remember: my locker is %d", i))
	}
	var err error
	select {
	case err = <-r.stack.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the stack did not stop on a 401")
	}
	if !errors.Is(err, pipeline.ErrStopped) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), m.URL()) ||
		strings.Contains(err.Error(), "sk-test-secret-key") {
		t.Fatalf("stopped with %v; want pipeline.ErrStopped naming the endpoint and HTTP 401, without the key", err)
	}
	lines := 0
	for _, e := range r.logs.All() {
		text := e.Message + fmt.Sprint(e.Context)
		if strings.Contains(text, "sk-test-secret-key") {
			t.Errorf("a log line shows the key: %s", text)
		}
		if e.Level >= zapcore.WarnLevel && strings.Contains(text, "401") {
			lines++
		}
	}
	if lines != 1 {
		t.Errorf("%d warn/error lines name the 401, want 1:\n%v", lines, r.logs.All())
	}
	if dls := r.deadLetters(t); len(dls) != 0 {
		t.Fatalf("dead-lettered: %+v", dls[0])
	}
	if info := r.consumer(t, bus.WorkerIngest); info.AckFloor.Stream != 0 || info.NumPending+uint64(info.NumAckPending) != n {
		t.Fatalf("ingest consumer: ack floor %d, %d pending, %d ack pending; want all %d observations still in the stream",
			info.AckFloor.Stream, info.NumPending, info.NumAckPending, n)
	}
	// The operations server stopped with the stack; its llm check is this.
	if err := r.stack.Runtime().Breakers.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "rejects the configuration") {
		t.Fatalf("llm ready check after the 401: %v", err)
	}
	mfs, err := r.stack.Runtime().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "agentmem_model_config_errors_total" {
			for _, mt := range mf.GetMetric() {
				found = found || (mt.GetCounter().GetValue() == 1 && mt.GetLabel()[0].GetValue() == app.EndpointLLM)
			}
		}
	}
	if !found {
		t.Fatal("agentmem_model_config_errors_total{endpoint=\"llm\"} is not 1")
	}
}
