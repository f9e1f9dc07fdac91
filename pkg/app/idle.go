package app

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus"
)

// WaitIdle waits until every worker durable has delivered and had acknowledged
// everything in the stream, twice in a row (a handler may publish follow-up events
// for another worker just before acking), polling every interval until ctx ends.
func WaitIdle(ctx context.Context, js jetstream.JetStream, interval time.Duration) error {
	durables := make([]string, len(streamWorkers))
	for i, w := range streamWorkers {
		durables[i] = bus.WorkerConsumer(w, bus.ConsumerDefaults{}).Durable
	}
	quiet := 0
	for {
		busy, err := pending(ctx, js, durables)
		if err != nil {
			return err
		}
		if busy == 0 {
			quiet++
			if quiet == 2 {
				return nil
			}
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("app: pipeline still has %d messages in flight: %w", busy, ctx.Err())
		case <-time.After(interval):
		}
	}
}

func pending(ctx context.Context, js jetstream.JetStream, durables []string) (uint64, error) {
	var n uint64
	for _, d := range durables {
		b, err := bus.Backlog(ctx, js, bus.DefaultStream, d)
		if err != nil {
			return 0, fmt.Errorf("app: %w", err)
		}
		n += b
	}
	return n, nil
}
