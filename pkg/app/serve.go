package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentmem/agentmem/pkg/obs"
)

// Component names, one per worker binary.
const (
	Ingest       = "ingest"
	Extractor    = "extractor"
	Consolidator = "consolidator"
	Retriever    = "retriever"
)

// Components lists every component, in start order (the registry's).
var Components = componentNames()

// ErrUnknownComponent is returned for a name not in Components.
var ErrUnknownComponent = errors.New("app: unknown component")

// Component is what every worker and the retriever implement.
type Component interface {
	// Run blocks until ctx ends, then drains and returns.
	Run(ctx context.Context) error
	// Ready is nil once the component consumes or serves.
	Ready(ctx context.Context) error
}

// Serve builds the named components and runs them with the operations server
// (/metrics, /healthz, /readyz on http.listen) until ctx ends or one of them fails;
// then it stops the others and returns the first error. onReady, if not nil, is
// called once every component is ready.
func Serve(ctx context.Context, rt *Runtime, names []string, onReady func()) error {
	comps := make(map[string]Component, len(names))
	for _, name := range names {
		if !slices.Contains(Components, name) {
			return fmt.Errorf("%w: %q (known: %v)", ErrUnknownComponent, name, Components)
		}
		c, err := rt.Component(ctx, name)
		if err != nil {
			return fmt.Errorf("app: build %s: %w", name, err)
		}
		comps[name] = c
	}
	ops, err := obs.NewServer(obs.ServerConfig{Listen: rt.Config.HTTP.Listen}, rt.Registry, rt.Logger)
	if err != nil {
		return err
	}
	ops.AddReadyCheck("nats", func(context.Context) error {
		if !rt.Conn.IsConnected() {
			return errors.New("not connected to NATS")
		}
		return nil
	})
	for name, c := range comps {
		ops.AddReadyCheck(name, c.Ready)
	}
	for _, b := range rt.Breakers {
		ops.AddReadyCheck(b.Name(), b.Ready)
	}
	if err := mountInspector(rt, ops); err != nil {
		return err
	}
	if err := ops.Start(); err != nil {
		return fmt.Errorf("http.listen: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ops.Shutdown(sctx)
	}()
	if a := ops.Addr(); a != "" {
		rt.Logger.Info("operations server listening", zap.String("addr", a), zap.Strings("components", names))
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return runInStopOrder(gctx, comps, Retriever) })
	if onReady != nil {
		g.Go(func() error {
			if err := waitReady(gctx, comps); err != nil {
				return nil // shutting down before ready is not an error of its own
			}
			onReady()
			return nil
		})
	}
	return g.Wait()
}

// runInStopOrder runs comps until ctx ends or one fails, and stops them in order:
// every component but last first, then last once they have all returned. With
// last the retriever, the stream workers finish what they hold (and publish its
// memory_written and hits) while the retriever still answers. It returns the
// first error.
func runInStopOrder(ctx context.Context, comps map[string]Component, last string) error {
	g, gctx := errgroup.WithContext(ctx)
	lateCtx, stopLate := context.WithCancel(context.WithoutCancel(gctx))
	defer stopLate()
	var early sync.WaitGroup
	for name, c := range comps {
		runCtx := gctx
		if name == last {
			runCtx = lateCtx
		} else {
			early.Add(1)
		}
		g.Go(func() error {
			if name != last {
				defer early.Done()
			}
			if err := c.Run(runCtx); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
	}
	go func() {
		<-gctx.Done()
		early.Wait()
		stopLate()
	}()
	return g.Wait()
}

// waitReady polls until every component is ready or ctx ends.
func waitReady(ctx context.Context, comps map[string]Component) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ready := true
		for _, c := range comps {
			if c.Ready(ctx) != nil {
				ready = false
				break
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
