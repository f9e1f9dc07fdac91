package llm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

type observed struct {
	mu     sync.Mutex
	calls  map[[2]string]int
	tokens int
}

func (o *observed) ObserveLLMCall(step, outcome string, prompt, completion int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[[2]string{step, outcome}]++
	o.tokens += prompt + completion
}

const decideSchema = `{"type":"object","required":["write"],"properties":{"write":{"type":"boolean"}}}`

// Issue 22: one client has at most Concurrency calls in flight, whatever the
// callers; each attempt is observed with its step, outcome and tokens.
func TestClientBoundsCallsInFlightAndObservesThem(t *testing.T) {
	m := llmtest.NewModel(t)
	const latency, calls, slots = 200 * time.Millisecond, 6, 2
	m.SetLatency(latency, 0)
	o := &observed{calls: map[[2]string]int{}}
	c, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "fake", Concurrency: slots, Observer: o}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := llm.WithStep(context.Background(), "decide")
	start := time.Now()
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			var out struct{ Write bool }
			if err := c.CompleteJSON(ctx, "You decide whether one message", "Message:\nI like tea", []byte(decideSchema), &out); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if took, least := time.Since(start), calls/slots*latency; took < least {
		t.Errorf("%d calls took %s with %d slots at %s each, want at least %s", calls, took, slots, latency, least)
	}
	if got := o.calls[[2]string{"decide", llm.OutcomeOK}]; got != calls {
		t.Errorf("observed %v, want %d ok decide calls", o.calls, calls)
	}
	if o.tokens == 0 {
		t.Error("no tokens observed; the model reports usage")
	}
}

func TestCallBudget(t *testing.T) {
	// 4 attempts of 5 s, backoff 1+2+4 s.
	if got, want := (llm.Config{Timeout: 5 * time.Second}).CallBudget(), 27*time.Second; got != want {
		t.Errorf("CallBudget = %s, want %s", got, want)
	}
}
