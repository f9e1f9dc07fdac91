package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/clock"
)

func TestNowPrefersTheContextTime(t *testing.T) {
	fallback := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	fixed := func() time.Time { return fallback }
	if got := clock.Now(context.Background(), fixed); !got.Equal(fallback) {
		t.Fatalf("no time in ctx: got %s, want the fallback %s", got, fallback)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if got := clock.Now(clock.At(context.Background(), at), fixed); !got.Equal(at) {
		t.Fatalf("clock.At: got %s, want %s", got, at)
	}
}

// Sleep returns nil once d has passed, and ctx's error, long before d, once ctx
// ends: a shutdown is never held by a retry's wait.
func TestSleepEndsWithTheContext(t *testing.T) {
	if err := clock.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep of 1ms: %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, time.Hour) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep with an ended context: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Sleep of an hour with an ended context did not return")
	}
}
