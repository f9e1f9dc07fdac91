package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
)

// backlog times context requests, one after another as in the latency phase,
// while ingest works through a backlog of observations published all at once:
// reads must stay fast while the process writes (the retriever serves each
// request on its own goroutine and ingest batches yield to it). Only requests
// answered before the backlog drained count; the ratio to the idle p99 of the
// latency phase is the target.
func (b *bencher) backlog(ctx context.Context, res *Result) error {
	n := b.cfg.IngestMessages
	fmt.Fprintf(b.cfg.Progress, "== context requests while ingest drains a backlog of %d observations\n", n)
	msgs, err := observations(tenantBacklog, n, ingestUsers, 8)
	if err != nil {
		return err
	}
	ctxSubject, err := events.RPCSubject(tenantLoad, events.EndpointContext)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := b.publishAsync(ctx, msgs); err != nil {
		return err
	}
	durable := bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{}).Durable
	gen := newTexts(9)
	var lat []time.Duration
	for {
		busy, err := bus.Backlog(ctx, b.rt.JS, bus.DefaultStream, durable)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if busy == 0 || len(lat) >= b.cfg.Requests {
			break
		}
		data, err := json.Marshal(events.ContextRequest{UserID: askedUser, AgentID: agentID, SessionID: askedSession, Query: gen.query()})
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		t0 := time.Now()
		reply, err := b.nc.RequestWithContext(ctx, ctxSubject, data)
		took := time.Since(t0)
		if err != nil {
			return fmt.Errorf("%w: context request under backlog: %w", ErrMeasurement, err)
		}
		if _, err := decodePack(reply); err != nil {
			return fmt.Errorf("%w: context request under backlog: %w", ErrMeasurement, err)
		}
		lat = append(lat, took)
	}
	if err := b.drain(ctx, bus.DefaultStream, durable, n, newProgress(b.cfg.Progress, "observations", n)); err != nil {
		return err
	}
	if len(lat) == 0 {
		return fmt.Errorf("%w: the backlog of %d observations drained before a context request was answered; raise --ingest-messages", ErrMeasurement, n)
	}
	res.BacklogRequests = len(lat)
	res.CtxBacklogP50us, res.CtxBacklogP99us = micros(percentile(lat, 0.50)), micros(percentile(lat, 0.99))
	return nil
}
