package priority_test

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/priority"
)

// Background work goes at once when nothing runs in the foreground, waits while
// something does, goes as soon as the last foreground work is done, and never
// waits past MaxWait (an hour here would fail the test's deadline).
func TestBackgroundWaitsForForeground(t *testing.T) {
	g := priority.New(time.Hour)
	ctx := context.Background()
	if err := g.Background(ctx); err != nil {
		t.Fatal(err)
	}
	done1, done2 := g.Foreground(), g.Foreground()
	started := make(chan struct{})
	go func() {
		_ = g.Background(ctx)
		close(started)
	}()
	done1()
	select {
	case <-started:
		t.Fatal("background work started while foreground work still ran")
	default:
	}
	done2()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("background work still waiting after the foreground was done")
	}
	done2() // a second call is harmless
	if err := g.Background(ctx); err != nil {
		t.Fatal(err)
	}
}

// A wait ends at MaxWait even while the foreground never stops, and with the
// context's error when it ends first.
func TestBackgroundWaitIsBounded(t *testing.T) {
	g := priority.New(time.Millisecond)
	defer g.Foreground()()
	if err := g.Background(context.Background()); err != nil {
		t.Fatalf("bounded wait: %v", err)
	}
	long := priority.New(time.Hour)
	defer long.Foreground()()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := long.Background(ctx); err != context.Canceled {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// Property: after any interleaving of Foreground calls and their dones, the gate
// is idle exactly when every Foreground was done.
func TestGateIdleIffAllDone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := priority.New(time.Hour)
		var open []func()
		for _, start := range rapid.SliceOf(rapid.Bool()).Draw(t, "ops") {
			if start || len(open) == 0 {
				open = append(open, g.Foreground())
				continue
			}
			i := rapid.IntRange(0, len(open)-1).Draw(t, "which")
			open[i]()
			open = append(open[:i], open[i+1:]...)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if len(open) > 0 {
			cancel() // busy: Background must wait, so it returns the context's error
		}
		err := g.Background(ctx)
		cancel()
		if (err == nil) != (len(open) == 0) {
			t.Fatalf("%d foreground works open, Background returned %v", len(open), err)
		}
	})
}

// A nil gate orders nothing.
func TestNilGate(t *testing.T) {
	var g *priority.Gate
	g.Foreground()()
	if err := g.Background(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// New with no positive bound waits DefaultMaxWait behind foreground work that
// never ends, not zero (which would yield nothing).
func TestNewDefaultsTheMaxWait(t *testing.T) {
	for _, maxWait := range []time.Duration{0, -time.Second} {
		g := priority.New(maxWait)
		done := g.Foreground()
		start := time.Now()
		if err := g.Background(context.Background()); err != nil {
			t.Fatalf("New(%v): %v", maxWait, err)
		}
		if waited := time.Since(start); waited < priority.DefaultMaxWait {
			t.Errorf("New(%v): background work waited %v behind the foreground, want DefaultMaxWait (%v)", maxWait, waited, priority.DefaultMaxWait)
		}
		done()
	}
}
