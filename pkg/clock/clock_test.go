package clock_test

import (
	"context"
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
