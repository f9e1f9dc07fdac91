package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/breaker"
	"github.com/agentmem/agentmem/pkg/breaker/breakertest"
	"github.com/agentmem/agentmem/pkg/bus"
)

var (
	errDown   = errors.New("connection refused")
	errConfig = errors.New("HTTP 401")
)

func classify(err error) breaker.Class {
	switch {
	case errors.Is(err, errDown):
		return breaker.ClassTransient
	case errors.Is(err, errConfig):
		return breaker.ClassConfig
	}
	return breaker.ClassSuccess
}

func newBreaker(t *testing.T, openFor time.Duration) (*breaker.Breaker, *[]breaker.State) {
	t.Helper()
	var changes []breaker.State
	b, err := breaker.New(breaker.Config{
		Name: "llm", Endpoint: "http://model/v1", Classify: classify,
		OpenFor: openFor, MaxOpenFor: 4 * openFor,
		OnChange: func(s breaker.State) { changes = append(changes, s) },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, &changes
}

func call(b *breaker.Breaker, err error) (called bool, out error) {
	out = b.Do(context.Background(), func(context.Context) error { called = true; return err })
	return called, out
}

// waitState polls until b is in state s.
func waitState(t *testing.T, b *breaker.Breaker, s breaker.State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for b.State() != s {
		select {
		case <-ctx.Done():
			t.Fatalf("state %s, want %s", b.State(), s)
		case <-time.After(time.Millisecond):
		}
	}
}

// A transient failure opens the circuit: calls are refused without reaching the
// endpoint, as outage errors the Router waits out, and the endpoint is not ready.
// After the open period one probe goes through; its failure reopens the circuit
// for longer, its success closes it and wakes the waiters.
func TestOutageOpensProbesAndCloses(t *testing.T) {
	b, changes := newBreaker(t, 50*time.Millisecond)
	if called, err := call(b, nil); !called || err != nil || b.Ready(context.Background()) != nil {
		t.Fatalf("closed breaker: called %v, err %v", called, err)
	}
	_, err := call(b, errDown)
	if !bus.IsOutage(err) || !errors.Is(err, errDown) || b.State() != breaker.StateOpen {
		t.Fatalf("transient failure: %v (outage %v), state %s", err, bus.IsOutage(err), b.State())
	}
	if b.Ready(context.Background()) == nil || !(breaker.Group{b}).Closed() {
		t.Fatal("open breaker is ready, or its gate is not closed")
	}
	called, err := call(b, nil)
	if called || !bus.IsOutage(err) || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("open breaker: called %v, err %v", called, err)
	}

	// Waiters wake when it half-opens; the probe fails and it opens again.
	var outage bus.OutageError
	errors.As(err, &outage)
	if err := outage.WaitRecovery(context.Background()); err != nil || b.State() != breaker.StateHalfOpen {
		t.Fatalf("wait: %v, state %s", err, b.State())
	}
	if called, err := call(b, errDown); !called || !bus.IsOutage(err) || b.State() != breaker.StateOpen {
		t.Fatalf("failed probe: called %v, %v, state %s", called, err, b.State())
	}
	waitState(t, b, breaker.StateHalfOpen)
	if called, err := call(b, nil); !called || err != nil || b.State() != breaker.StateClosed {
		t.Fatalf("probe: called %v, %v, state %s", called, err, b.State())
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("closed again but not ready: %v", err)
	}
	want := []breaker.State{breaker.StateOpen, breaker.StateHalfOpen, breaker.StateProbing, breaker.StateOpen, breaker.StateHalfOpen, breaker.StateProbing, breaker.StateClosed}
	if len(*changes) != len(want) {
		t.Fatalf("changes %v, want %v", *changes, want)
	}
	for i := range want {
		if (*changes)[i] != want[i] {
			t.Fatalf("changes %v, want %v", *changes, want)
		}
	}
}

// While the probe is in flight other calls are refused, and waiters stay asleep
// until it settles.
func TestOneProbeAtATime(t *testing.T) {
	b, _ := newBreaker(t, 10*time.Millisecond)
	call(b, errDown)
	waitState(t, b, breaker.StateHalfOpen)
	release := make(chan struct{})
	probed := make(chan error, 1)
	go func() {
		probed <- b.Do(context.Background(), func(context.Context) error { <-release; return nil })
	}()
	waitState(t, b, breaker.StateProbing)
	if called, err := call(b, nil); called || !bus.IsOutage(err) {
		t.Fatalf("second call during the probe: called %v, %v", called, err)
	}
	woke := make(chan error, 1)
	go func() { woke <- b.Wait(context.Background()) }()
	select {
	case err := <-woke:
		t.Fatalf("waiter woke during the probe: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	close(release)
	if err := <-probed; err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil || b.State() != breaker.StateClosed {
		t.Fatalf("waiter: %v, state %s", err, b.State())
	}
}

// A call whose caller gave up, cancelled or past its deadline, says nothing
// about the endpoint: the deadline also ran while the call waited its turn.
func TestCallerDeadlineAndCancelAreNeutral(t *testing.T) {
	b, changes := newBreaker(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.Do(ctx, func(ctx context.Context) error { return ctx.Err() })
	if bus.IsOutage(err) || b.State() != breaker.StateClosed {
		t.Fatalf("cancelled call: %v, state %s", err, b.State())
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	// The endpoint's client reports the cut request as unreachable, as it does.
	err = b.Do(ctx, func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("%w: %w", errDown, ctx.Err()) })
	if bus.IsOutage(err) || b.State() != breaker.StateClosed || len(*changes) != 0 {
		t.Fatalf("call past its caller's deadline: %v, state %s, changes %v", err, b.State(), *changes)
	}
}

// outcome is what one call of the properties below does.
type outcome int

const (
	answers    outcome = iota // the endpoint answers
	fails                     // the client reports it unreachable (its own timeout, 5xx)
	callerEnds                // the caller's deadline passes during the call
	callerGone                // the caller cancels during the call
	callPanics                // the call panics (a bug above the client)
	outcomeCount
)

// run makes one call with outcome o; a panic is recovered here.
func run(b *breaker.Breaker, o outcome) (called bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if o == callerEnds {
		ctx, cancel = context.WithDeadline(ctx, time.Now())
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil && o != callPanics {
			panic(r)
		}
	}()
	err = b.Do(ctx, func(ctx context.Context) error {
		called = true
		switch o {
		case fails:
			return errDown
		case callerEnds:
			<-ctx.Done()
			return fmt.Errorf("%w: %w", errDown, ctx.Err())
		case callerGone:
			cancel()
			return fmt.Errorf("%w: %w", errDown, ctx.Err())
		case callPanics:
			panic("bug")
		}
		return nil
	})
	return called, err
}

// An endpoint that always answers keeps the circuit closed however its callers
// give up: no deadline or cancellation of theirs, whenever it comes, opens it.
func TestPropertyAnsweringEndpointStaysClosed(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var changes []breaker.State
		b, err := breaker.New(breaker.Config{Name: "llm", Endpoint: "http://model/v1", Classify: classify,
			OnChange: func(s breaker.State) { changes = append(changes, s) }}, nil)
		if err != nil {
			rt.Fatal(err)
		}
		ops := rapid.SliceOfN(rapid.SampledFrom([]outcome{answers, callerEnds, callerGone}), 1, 50).Draw(rt, "calls")
		for i, o := range ops {
			if called, _ := run(b, o); !called || b.State() != breaker.StateClosed {
				rt.Fatalf("call %d (%d): called %v, state %s", i, o, called, b.State())
			}
		}
		if len(changes) != 0 {
			rt.Fatalf("state changes %v", changes)
		}
	})
}

// Whatever happened before (failures, probes cut short, panics), once the
// endpoint answers again every caller that waits out the outage as a stream
// worker does (WaitRecovery, then call again) gets through, and the circuit
// closes: an open circuit always gets its probe.
func TestPropertyOpenCircuitAlwaysRecovers(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b, err := breaker.New(breaker.Config{Name: "llm", Endpoint: "http://model/v1", Classify: classify,
			OpenFor: time.Millisecond, MaxOpenFor: 4 * time.Millisecond}, nil)
		if err != nil {
			rt.Fatal(err)
		}
		history := rapid.SliceOfN(rapid.IntRange(0, int(outcomeCount)-1), 1, 30).Draw(rt, "history")
		for _, o := range history {
			if b.State() == breaker.StateOpen && rapid.Bool().Draw(rt, "wait out the open period") {
				waitPassable(rt, b)
			}
			run(b, outcome(o))
		}
		// A waiter's first call may be cut short by its caller; the next ones are not.
		firsts := rapid.SliceOfN(rapid.SampledFrom([]outcome{answers, callerGone}), 1, 16).Draw(rt, "waiters")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var g errgroup.Group
		for _, o := range firsts {
			g.Go(func() error {
				err := breakertest.CallUntilAnswered(ctx, func(attempt int) error {
					if attempt > 0 {
						o = answers
					}
					_, err := run(b, o)
					return err
				}, func(error) bool { return true })
				if err != nil {
					return fmt.Errorf("state %s: %w", b.State(), err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			rt.Fatal(err)
		}
		if b.State() != breaker.StateClosed {
			rt.Fatalf("state %s after every waiter got through", b.State())
		}
	})
}

// waitPassable waits until b lets a call through.
func waitPassable(t interface{ Fatal(...any) }, b *breaker.Breaker) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// A configuration error latches the breaker: every later call is refused with it,
// as a ConfigError, and it never becomes passable or ready again.
func TestConfigErrorLatches(t *testing.T) {
	b, changes := newBreaker(t, time.Millisecond)
	_, err := call(b, errConfig)
	if !bus.IsConfigError(err) || bus.IsOutage(err) || !errors.Is(err, errConfig) {
		t.Fatalf("config error: %v", err)
	}
	called, err := call(b, nil)
	if called || !bus.IsConfigError(err) || !errors.Is(err, breaker.ErrMisconfigured) || !errors.Is(err, errConfig) {
		t.Fatalf("after a config error: called %v, %v", called, err)
	}
	if b.Ready(context.Background()) == nil || !(breaker.Group{b}).Closed() || b.State() != breaker.StateMisconfigured {
		t.Fatalf("misconfigured breaker passable or ready; state %s", b.State())
	}
	if len(*changes) != 1 || (*changes)[0] != breaker.StateMisconfigured {
		t.Fatalf("changes %v", *changes)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []breaker.Config{
		{Endpoint: "x", Classify: classify},
		{Name: "llm", Endpoint: "x"},
		{Name: "llm", Endpoint: "x", Classify: classify, OpenFor: time.Minute, MaxOpenFor: time.Second},
		{Name: "llm", Endpoint: "x", Classify: classify, Threshold: -1},
	} {
		if _, err := breaker.New(c, nil); !errors.Is(err, breaker.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
}

// Each failed probe doubles the open period (50, 100, 200 ms here): an endpoint
// that stays down is asked less and less often. The timer never fires early, so
// each period is at least its length however loaded the machine is.
func TestFailedProbeDoublesTheOpenPeriod(t *testing.T) {
	const openFor = 50 * time.Millisecond
	b, _ := newBreaker(t, openFor)
	for _, want := range []time.Duration{openFor, 2 * openFor, 4 * openFor} {
		start := time.Now()
		if called, err := call(b, errDown); !called || !bus.IsOutage(err) || b.State() != breaker.StateOpen {
			t.Fatalf("failure: called %v, %v, state %s", called, err, b.State())
		}
		waitState(t, b, breaker.StateHalfOpen)
		if got := time.Since(start); got < want {
			t.Fatalf("open for %s, want at least %s", got, want)
		}
	}
}
