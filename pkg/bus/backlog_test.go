package bus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// A durable's backlog counts the messages on its filters until each is delivered
// and acknowledged, and ignores the stream's other subjects.
func TestBacklogCountsMessagesUntilAcknowledged(t *testing.T) {
	ctx := testCtx(t)
	_, _, js := bustest.Provisioned(t)
	const stream = "BACKLOG"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"backlog.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "mine", FilterSubject: "backlog.mine", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"backlog.mine", "backlog.other", "backlog.mine", "backlog.mine", "backlog.other"} {
		if _, err := js.Publish(ctx, subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	wantBacklog := func(durable string, want uint64) {
		t.Helper()
		bustest.Eventually(t, 10*time.Second, func() error {
			got, err := bus.Backlog(ctx, js, stream, durable)
			if err == nil && got != want {
				err = fmt.Errorf("backlog of %s = %d, want %d", durable, got, want)
			}
			return err
		})
	}
	wantBacklog("mine", 3)

	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var fetched []jetstream.Msg
	for m := range batch.Messages() {
		fetched = append(fetched, m)
	}
	if len(fetched) != 2 {
		t.Fatalf("fetched %d messages, want 2 (%v)", len(fetched), batch.Error())
	}
	// Delivered but unacknowledged messages are still the durable's to handle.
	wantBacklog("mine", 3)
	if err := fetched[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	wantBacklog("mine", 2)
	if err := fetched[1].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	batch, err = cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantBacklog("mine", 0)

	// Without filters every message of the stream counts.
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "all", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	wantBacklog("all", 5)

	if _, err := bus.Backlog(ctx, js, stream, "missing"); err == nil {
		t.Fatal("the backlog of a durable that does not exist: no error")
	}
}
