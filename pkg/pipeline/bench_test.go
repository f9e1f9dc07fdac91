package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/pipeline"
)

// BenchmarkBatchWorker is what the runtime costs per message: observations through
// a batching worker configured as ingest is, whose handler does nothing.
// Compare its msgs/s with pkg/ingest's BenchmarkRawJetStream and BenchmarkIngest.
func BenchmarkBatchWorker(b *testing.B) {
	srv, _, _ := bustest.Provisioned(b)
	cfg := pipeline.Config{
		Worker:   bus.WorkerIngest,
		Consumer: bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{}),
		Dial:     dialer(srv),
	}
	w, err := pipeline.NewBatch(cfg, pipeline.BatchConfig{}, func(context.Context, []events.Envelope) []error { return nil }, nil)
	if err != nil {
		b.Fatal(err)
	}
	run(b, w)
	msgs := make([]*nats.Msg, max(b.N, 5000))
	for i := range msgs {
		env := events.New(events.TypeObservation, "acme", fmt.Sprintf("u%03d", i/20%100), "bot", fmt.Sprintf("s-%05d", i/20))
		env.Observation = &events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("I have been leading project %d for %d months.", i, i%30+2),
			Meta: map[string]any{"dia_id": fmt.Sprintf("D%d:%d", i/20+1, i%20+1)}}
		msg, err := eventstore.Msg(env)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = msg
	}
	bustest.PublishAndDrain(b, srv, bus.DefaultStream, cfg.Consumer.Durable, msgs)
}
