package ingest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/ingest"
)

// benchObservations are n observations the write decider keeps, of 100 users in
// sessions of 20 messages, as agentmem bench publishes them.
func benchObservations(b *testing.B, n int) []*nats.Msg {
	b.Helper()
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		s := i / 20
		env := events.New(events.TypeObservation, "acme", fmt.Sprintf("u%03d", s%100), "bot", fmt.Sprintf("s-%05d", s))
		env.Observation = &events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("Remember: my project number %d uses the %d-column layout", i, i%7+2)}
		msg, err := eventstore.Msg(env)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = msg
	}
	return msgs
}

// BenchmarkIngest is the ingest phase of agentmem bench: observations published
// asynchronously until the ingest durable acked the last, each stored as an
// episodic memory. Compare its msgs/s with BenchmarkRawJetStream's.
func BenchmarkIngest(b *testing.B) {
	r := startIngestWith(b, ingest.Config{})
	bustest.PublishAndDrain(b, r.srv, bus.DefaultStream, bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{}).Durable, benchObservations(b, max(b.N, 2000)))
}

// BenchmarkRawJetStream is the same traffic through a plain durable pull consumer
// that acks each message.
func BenchmarkRawJetStream(b *testing.B) {
	srv, _, js := bustest.Provisioned(b)
	ctx := context.Background()
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.DefaultStream, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	conn := bustest.Connect(b, srv)
	cjs, err := jetstream.New(conn)
	if err != nil {
		b.Fatal(err)
	}
	if cons, err = cjs.Consumer(ctx, bus.DefaultStream, "raw"); err != nil {
		b.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { _ = m.Ack() })
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	bustest.PublishAndDrain(b, srv, bus.DefaultStream, "raw", benchObservations(b, max(b.N, 2000)))
}
