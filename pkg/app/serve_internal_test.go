package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// stopRecorder is a Component that records when its Run returned, and can fail.
type stopRecorder struct {
	name    string
	fail    <-chan struct{}
	mu      *sync.Mutex
	stopped *[]string
}

func (c stopRecorder) Run(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case <-c.fail:
		err = errors.New("failed")
	}
	// Take a moment, as a worker finishing what it holds would: the last one must
	// still wait for it.
	time.Sleep(10 * time.Millisecond)
	c.mu.Lock()
	*c.stopped = append(*c.stopped, c.name)
	c.mu.Unlock()
	return err
}

func (stopRecorder) Ready(context.Context) error { return nil }

// The retriever stops only after every stream worker has returned, whether the
// stop comes from the caller or from a worker's failure.
func TestRetrieverStopsAfterTheWorkers(t *testing.T) {
	for _, failing := range []bool{false, true} {
		var (
			mu      sync.Mutex
			stopped []string
			fail    = make(chan struct{})
		)
		comps := map[string]Component{}
		for _, name := range Components {
			comps[name] = stopRecorder{name: name, mu: &mu, stopped: &stopped}
		}
		comps[Ingest] = stopRecorder{name: Ingest, fail: fail, mu: &mu, stopped: &stopped}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runInStopOrder(ctx, comps, Retriever) }()
		if failing {
			close(fail)
		} else {
			cancel()
		}
		err := <-done
		cancel()
		if failing != (err != nil) {
			t.Errorf("failing %v: error %v", failing, err)
		}
		if len(stopped) != len(Components) || stopped[len(stopped)-1] != Retriever {
			t.Errorf("failing %v: stopped in order %v, want the retriever last", failing, stopped)
		}
		if !slices.Contains(stopped, Ingest) {
			t.Errorf("failing %v: ingest never stopped: %v", failing, stopped)
		}
	}
}
