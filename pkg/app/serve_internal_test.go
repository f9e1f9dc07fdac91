package app

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// stopOrder records, when the last component's context ends, whether every other
// component had returned by then.
type stopOrder struct {
	mu       sync.Mutex
	returned map[string]bool
	early    []string // components not returned when the last one was told to stop
	lastSaw  chan struct{}
}

// worker is a stream worker: after its context ends it takes a while to finish
// what it holds (a bound, not a synchronisation: in the right order the last
// component waits for it; in the wrong one the last component's check runs first),
// and it may fail.
type worker struct {
	name string
	o    *stopOrder
	fail <-chan struct{}
}

func (w worker) Run(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case <-w.fail:
		err = errors.New("failed")
	}
	select {
	case <-w.o.lastSaw:
	case <-time.After(100 * time.Millisecond):
	}
	w.o.mu.Lock()
	w.o.returned[w.name] = true
	w.o.mu.Unlock()
	return err
}

func (worker) Ready(context.Context) error { return nil }

// last is the component that must stop last.
type last struct{ o *stopOrder }

func (l last) Run(ctx context.Context) error {
	<-ctx.Done()
	l.o.mu.Lock()
	for _, name := range Components {
		if name != Retriever && !l.o.returned[name] {
			l.o.early = append(l.o.early, name)
		}
	}
	l.o.mu.Unlock()
	close(l.o.lastSaw)
	return nil
}

func (last) Ready(context.Context) error { return nil }

// The retriever is told to stop only once every stream worker has returned,
// whether the stop comes from the caller or from a worker's failure.
func TestRetrieverStopsAfterTheWorkers(t *testing.T) {
	for _, failing := range []bool{false, true} {
		o := &stopOrder{returned: map[string]bool{}, lastSaw: make(chan struct{})}
		fail := make(chan struct{})
		comps := map[string]Component{Retriever: last{o}}
		for _, name := range Components {
			if name != Retriever {
				comps[name] = worker{name: name, o: o}
			}
		}
		comps[Ingest] = worker{name: Ingest, o: o, fail: fail}
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
		if len(o.early) > 0 {
			t.Errorf("failing %v: the retriever was told to stop while %v still ran", failing, o.early)
		}
	}
}
