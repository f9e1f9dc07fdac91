package breaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/breaker"
)

// stillOpenAfter reports whether b stays unpassable for d: Wait must end with
// its deadline, not with the circuit half open.
func stillOpenAfter(b *breaker.Breaker, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return errors.Is(b.Wait(ctx), context.DeadlineExceeded)
}

// The defaults hold when a Config leaves them out: the first open period is 5s
// (so a circuit opened by a failure is still open a second later), and the
// doubled period after a failed probe is capped at 30s, not at zero.
func TestOpenPeriodDefaults(t *testing.T) {
	b, err := breaker.New(breaker.Config{Name: "llm", Endpoint: "http://model/v1", Classify: classify}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call(b, errDown)
	if !stillOpenAfter(b, time.Second) {
		t.Fatalf("with the default OpenFor the circuit is passable within a second of opening (state %s)", b.State())
	}

	b, err = breaker.New(breaker.Config{Name: "llm", Endpoint: "http://model/v1", Classify: classify, OpenFor: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call(b, errDown)
	waitState(t, b, breaker.StateHalfOpen)
	if called, _ := call(b, errDown); !called {
		t.Fatal("the half-open circuit did not let its probe through")
	}
	if !stillOpenAfter(b, time.Second) {
		t.Fatalf("after a failed probe with the default MaxOpenFor the circuit is passable within a second (state %s); want it open for 2s", b.State())
	}
}
