package docstore

import (
	"context"
	"sync"
)

// pathLocks is a set of per-path mutexes that honour context cancellation; an
// entry lives only while someone holds or waits for it, so the map stays small.
type pathLocks struct {
	mu sync.Mutex
	m  map[string]*pathLock
}

type pathLock struct {
	sem  chan struct{} // capacity 1: holding the token is holding the lock
	refs int
}

func newPathLocks() *pathLocks {
	return &pathLocks{m: make(map[string]*pathLock)}
}

// lock blocks until p is free or ctx is done, and returns the unlock function.
func (l *pathLocks) lock(ctx context.Context, p string) (func(), error) {
	l.mu.Lock()
	pl, ok := l.m[p]
	if !ok {
		pl = &pathLock{sem: make(chan struct{}, 1)}
		l.m[p] = pl
	}
	pl.refs++
	l.mu.Unlock()

	select {
	case pl.sem <- struct{}{}:
		return func() {
			<-pl.sem
			l.release(p, pl)
		}, nil
	case <-ctx.Done():
		l.release(p, pl)
		return nil, ctx.Err()
	}
}

func (l *pathLocks) release(p string, pl *pathLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pl.refs--; pl.refs == 0 {
		delete(l.m, p)
	}
}
