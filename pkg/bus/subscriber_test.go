package bus_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/zap/zaptest"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// The Subscriber pulls as many messages as it has free slots and never more: with
// Concurrency 4 and 4 messages unsettled, the server has delivered exactly 4; each
// settled message frees its slot for the next pull, so the rest all come.
func TestSubscriberPullsOnlyIntoFreeSlots(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	const n, concurrency = 10, 4
	for i := range n {
		publish(t, js, "mem.acme.obs.u1.s1", "ev-"+strconv.Itoa(i), "x")
	}
	sub, err := bus.NewSubscriber(bus.SubscriberConfig{Conn: bustest.Connect(t, srv), Consumer: testSpec("batch"), Concurrency: concurrency}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	receive := func(k int) []*message.Message {
		t.Helper()
		out := make([]*message.Message, 0, k)
		for range k {
			select {
			case m := <-msgs:
				out = append(out, m)
			case <-time.After(wait):
				t.Fatalf("received %d messages, want %d", len(out), k)
			}
		}
		return out
	}

	held := receive(concurrency)
	c, err := js.Consumer(ctx, bus.DefaultStream, "batch")
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != concurrency || info.NumPending != n-concurrency {
		t.Fatalf("with %d messages unsettled: %d delivered and unacked, %d pending; want %d and %d",
			concurrency, info.NumAckPending, info.NumPending, concurrency, n-concurrency)
	}
	for _, m := range held {
		m.Ack()
	}
	for range n - concurrency {
		receive(1)[0].Ack()
	}
	waitAcked(t, js, "batch", n)
}
