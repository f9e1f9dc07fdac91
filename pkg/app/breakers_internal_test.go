package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentmem/agentmem/pkg/breaker"
	"github.com/agentmem/agentmem/pkg/breaker/breakertest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

// What an endpoint's HTTP status says about it: a refused key (401, 403) or an
// unknown model or path (404) is a configuration error that stops the workers;
// overload and server errors are an outage they wait out; any other refusal is
// about one request, and the endpoint answered.
func TestHTTPStatusClasses(t *testing.T) {
	for status, want := range map[int]breaker.Class{
		http.StatusUnauthorized:        breaker.ClassConfig,
		http.StatusForbidden:           breaker.ClassConfig,
		http.StatusNotFound:            breaker.ClassConfig,
		http.StatusBadRequest:          breaker.ClassSuccess,
		http.StatusTooManyRequests:     breaker.ClassTransient,
		http.StatusInternalServerError: breaker.ClassTransient,
	} {
		srv := llmtest.NewModel(t)
		srv.SetStatus(status)
		chat, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := classifyLLM(chat.CompleteJSON(context.Background(), "s", "u", []byte(`{"type":"object"}`), &map[string]any{})); got != want {
			t.Errorf("chat model HTTP %d: class %v, want %v", status, got, want)
		}
		emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL(), Model: "m", Dimensions: 4, Retries: -1, RetryBase: time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = emb.Embed(context.Background(), []string{"x"})
		if got := classifyEmbed(err); got != want {
			t.Errorf("embeddings HTTP %d: class %v (%v), want %v", status, got, err, want)
		}
	}
}

// slowModelRig is a chat client and an embedder of one fake endpoint that answers
// every request, slowly, each behind its circuit breaker as the runtime wires
// them (newModels), with a chat concurrency of 2 so that callers queue.
type slowModelRig struct {
	model      *llmtest.Model
	chat       *llm.Client
	embedder   guardedEmbedder
	chatB, emb *breaker.Breaker
}

func newSlowModelRig(t *testing.T) slowModelRig {
	t.Helper()
	m := llmtest.NewModel(t)
	m.SetLatency(100*time.Millisecond, 50*time.Millisecond)
	rt := &Runtime{Registry: prometheus.NewRegistry(), Logger: zap.NewNop()}
	chatB, err := rt.newBreaker(EndpointLLM, m.URL(), classifyLLM)
	if err != nil {
		t.Fatal(err)
	}
	embB, err := rt.newBreaker(EndpointEmbedder, m.URL(), classifyEmbed)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "m", Timeout: 10 * time.Second, MaxRetries: -1, Concurrency: 2, Guard: chatB}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: m.URL(), Model: "e", Dimensions: 4, Retries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return slowModelRig{model: m, chat: chat, embedder: guardedEmbedder{Embedder: o, b: embB}, chatB: chatB, emb: embB}
}

// ask makes one chat call and one embeddings call within timeout.
func (r slowModelRig) ask(timeout time.Duration) (chatErr, embedErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	chatErr = r.chat.CompleteJSON(ctx, "s", "u", []byte(`{"type":"object"}`), &map[string]any{})
	_, embedErr = r.embedder.Embed(ctx, []string{"x"})
	return chatErr, embedErr
}

// A model that answers every request, but slowly, never opens a circuit, however
// many callers give up on it: 64 callers with deadlines from 20 to 650 ms queue
// behind a chat concurrency of 2 (100 ms a call), so most reach their deadline
// waiting for a slot or during the call. Their deadline is theirs, not the
// endpoint's failure (issue 32: the circuit opened under a healthy model and the
// pipeline stalled).
func TestSlowHealthyModelKeepsTheCircuitsClosed(t *testing.T) {
	r := newSlowModelRig(t)
	errs := make([][2]error, 64)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i][0], errs[i][1] = r.ask(time.Duration(20+10*i) * time.Millisecond) })
	}
	wg.Wait()
	answered := 0
	for i, e := range errs {
		for _, err := range e {
			switch {
			case err == nil:
				answered++
			case bus.IsOutage(err) || !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("caller %d: %v, want an answer or its own deadline", i, err)
			}
		}
	}
	if answered == 0 || answered == 2*len(errs) {
		t.Fatalf("%d of %d calls answered: the test did not make callers give up", answered, 2*len(errs))
	}
	if r.chatB.State() != breaker.StateClosed || r.emb.State() != breaker.StateClosed {
		t.Fatalf("chat circuit %s, embeddings circuit %s after a healthy model", r.chatB.State(), r.emb.State())
	}
	if err, _ := r.ask(5 * time.Second); err != nil {
		t.Fatalf("a call with time to wait: %v", err)
	}
}

// An open circuit gets its probe and closes once the model answers again, even
// when callers give up during the probe: 32 callers waiting out the outage as the
// stream workers do (WaitRecovery, then call again), their first call after the
// wait with a deadline shorter than the model's answer, all get through.
func TestOpenCircuitRecoversThroughItsProbe(t *testing.T) {
	r := newSlowModelRig(t)
	r.model.SetStatus(http.StatusServiceUnavailable)
	if err, _ := r.ask(5 * time.Second); !bus.IsOutage(err) || r.chatB.State() != breaker.StateOpen {
		t.Fatalf("failing model: %v, circuit %s", err, r.chatB.State())
	}
	r.model.SetStatus(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var g errgroup.Group
	for i := range 32 {
		g.Go(func() error {
			err := breakertest.CallUntilAnswered(ctx, func(attempt int) error {
				// The first call is refused (the circuit is open); the one after
				// the wait, the probe for one of them, gives up before the answer.
				timeout := time.Duration(10+i) * time.Millisecond
				if attempt > 1 {
					timeout = 5 * time.Second
				}
				err, _ := r.ask(timeout)
				return err
			}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) })
			if err != nil {
				return fmt.Errorf("caller %d, circuit %s: %w", i, r.chatB.State(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if r.chatB.State() != breaker.StateClosed {
		t.Fatalf("circuit %s after every caller got an answer", r.chatB.State())
	}
}
