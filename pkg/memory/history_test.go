package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/memory"
)

func TestHistoryLogKeepsTheNewest(t *testing.T) {
	f := newFixture(t, memory.Config{MaxHistory: 5})
	ctx := context.Background()
	log := f.svc.Log()
	id := uuid.NewString()
	for i := range 12 {
		if err := log.Append(ctx, "acme", "u1", id, events.Change{TS: t0.Add(time.Duration(i) * time.Second), Op: "reconsolidate", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Both spellings of a UUID name the same history.
	changes, err := log.List(ctx, "acme", "u1", strings.ToUpper(id))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, c := range changes {
		texts = append(texts, c.Text)
	}
	if got := strings.Join(texts, ","); got != "7,8,9,10,11" {
		t.Errorf("history holds %s, want the newest five 7..11 in order", got)
	}
	if other, err := log.List(ctx, "acme", "u2", id); err != nil || other != nil {
		t.Errorf("another user's history of the same id: %v, %v", other, err)
	}
}

// TestHistoryLogConcurrentAppends: the consolidator and the service append to
// one memory's history at once; compare-and-set loses none of them.
func TestHistoryLogConcurrentAppends(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- f.svc.Log().Append(ctx, "acme", "u1", id, events.Change{TS: t0, Op: "update", Text: fmt.Sprintf("%d-%d", w, i)})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	changes, err := f.svc.Log().List(ctx, "acme", "u1", id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range changes {
		seen[c.Text] = true
	}
	if len(changes) != writers*each || len(seen) != writers*each {
		t.Errorf("%d changes (%d distinct), want %d", len(changes), len(seen), writers*each)
	}
}

func TestHistoryLogBoundsValueSize(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	big := strings.Repeat("x", 100<<10)
	for i := range 12 {
		if err := f.svc.Log().Append(ctx, "acme", "u1", id, events.Change{TS: t0, Op: "update", Text: fmt.Sprintf("%d %s", i, big)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	changes, err := f.svc.Log().List(ctx, "acme", "u1", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) == 0 || len(changes) >= 12 || !strings.HasPrefix(changes[len(changes)-1].Text, "11 ") {
		t.Errorf("%d changes, want fewer than 12 ending with the newest", len(changes))
	}
}
