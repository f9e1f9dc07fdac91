package bus_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
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
	msgs, _ := subscribe(t, srv, bus.SubscriberConfig{Consumer: testSpec("batch"), Concurrency: concurrency})
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
	c, err := js.Consumer(testCtx(t), bus.DefaultStream, "batch")
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(testCtx(t))
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

// A consumer that filters on the client is provisioned without a server filter
// (also when it existed with one),
// hands out only the messages its FilterSubjects match, in stream order, and acks
// the others itself, so that nothing stays pending.
func TestSubscriberFiltersOnClient(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	subjects := []string{"mem.acme.obs.u1.s1", "mem.acme.hit.u1", "mem.acme.obs.u1.s2", "mem.acme.written.u1", "mem.acme.ended.u1.s1", "mem.acme.obs.u2.s1"}
	for i, subject := range subjects {
		publish(t, js, subject, "ev-"+strconv.Itoa(i), "x")
	}
	// A durable provisioned by an earlier version with the filter on the server
	// is updated in place.
	if _, err := bus.ProvisionConsumer(testCtx(t), js, bus.DefaultStream, testSpec("client-filtered")); err != nil {
		t.Fatal(err)
	}
	spec := testSpec("client-filtered")
	spec.FilterOnClient = true
	msgs, _ := subscribe(t, srv, bus.SubscriberConfig{Consumer: spec, Concurrency: 2})
	c, err := js.Consumer(testCtx(t), bus.DefaultStream, spec.Durable)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.FilterSubjects; len(got) != 0 || c.CachedInfo().Config.FilterSubject != "" {
		t.Fatalf("server-side filter %v, want none", got)
	}
	var got []string
	for range 3 {
		select {
		case m := <-msgs:
			got = append(got, m.Metadata.Get(bus.MetaSubject))
			m.Ack()
		case <-time.After(wait):
			t.Fatalf("received %v, want the 3 observations", got)
		}
	}
	if want := []string{subjects[0], subjects[2], subjects[5]}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v", got, want)
	}
	waitAcked(t, js, spec.Durable, uint64(len(subjects)))
	select {
	case m := <-msgs:
		t.Fatalf("handed out %s, which the filter does not match", m.Metadata.Get(bus.MetaSubject))
	default:
	}
}

// subscribeHeld subscribes to a fresh durable with ackWait, Concurrency 2 (so
// that a pull is always outstanding for a redelivery to come through) and
// maxProcessing, after publishing one message.
func subscribeHeld(t *testing.T, durable string, ackWait, maxProcessing time.Duration) (<-chan *message.Message, func() consumerState) {
	t.Helper()
	srv, _, js := bustest.Provisioned(t)
	publish(t, js, "mem.acme.obs.u1.s1", "ev-held", "x")
	spec := bus.ConsumerSpec{Durable: durable, FilterSubjects: []string{"mem.*.obs.*.*"}, AckWait: ackWait, MaxDeliver: 5}
	msgs, _ := subscribe(t, srv, bus.SubscriberConfig{Consumer: spec, Concurrency: 2, MaxProcessing: maxProcessing})
	info := func() consumerState {
		t.Helper()
		c, err := js.Consumer(testCtx(t), bus.DefaultStream, durable)
		if err != nil {
			t.Fatal(err)
		}
		i, err := c.Info(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		return consumerState{redelivered: i.NumRedelivered, ackPending: i.NumAckPending, ackFloor: i.AckFloor.Stream}
	}
	return msgs, info
}

type consumerState struct {
	redelivered, ackPending int
	ackFloor                uint64
}

// A message whose handler runs for several ack deadlines is kept by "in
// progress" acks: it is not redelivered while it is held, and its ack settles it.
func TestSubscriberExtendsTheAckDeadlineOfAHeldMessage(t *testing.T) {
	const ackWait = 300 * time.Millisecond
	msgs, info := subscribeHeld(t, "held", ackWait, time.Minute)
	var held *message.Message
	select {
	case held = <-msgs:
	case <-time.After(wait):
		t.Fatal("no message delivered")
	}
	// The handler's work: four ack deadlines long.
	select {
	case m := <-msgs:
		t.Fatalf("message %s (delivery %s) delivered again while held", m.UUID, m.Metadata.Get(bus.MetaDeliveryCount))
	case <-time.After(4 * ackWait):
	}
	if i := info(); i.redelivered != 0 || i.ackPending != 1 {
		t.Fatalf("while held: %d redelivered, %d ack pending; want 0 and 1", i.redelivered, i.ackPending)
	}
	held.Ack()
	bustest.Eventually(t, wait, func() error {
		if i := info(); i.ackFloor != 1 || i.ackPending != 0 || i.redelivered != 0 {
			return fmt.Errorf("after the ack: ack floor %d, %d ack pending, %d redelivered; want 1, 0, 0", i.ackFloor, i.ackPending, i.redelivered)
		}
		return nil
	})
}

// Past MaxProcessing the Subscriber stops extending a message's deadline, so the
// server redelivers it while the hung handler still holds the first delivery.
func TestSubscriberGivesUpAfterMaxProcessing(t *testing.T) {
	msgs, _ := subscribeHeld(t, "hung", 200*time.Millisecond, 300*time.Millisecond)
	var deliveries []string
	for len(deliveries) < 2 {
		select {
		case m := <-msgs:
			if m.UUID != "ev-held" {
				t.Fatalf("delivered %s, want ev-held", m.UUID)
			}
			deliveries = append(deliveries, m.Metadata.Get(bus.MetaDeliveryCount))
			defer m.Ack()
		case <-time.After(wait):
			t.Fatalf("deliveries %v; want the message redelivered once MaxProcessing passed", deliveries)
		}
	}
	if !slices.Equal(deliveries, []string{"1", "2"}) {
		t.Fatalf("delivery counts %v, want [1 2]", deliveries)
	}
}

// Messages that reach a pull request after the subscription was told to stop are
// still handed out, each on its first delivery. Handing them back with a nak
// redelivered them at once into the same open pull request, again and again:
// during a graceful stop messages used up their MaxDeliver within milliseconds
// and the server dropped them.
func TestSubscriberHandsOutWhatArrivesAfterStop(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	spec := testSpec("stopping")
	msgs, cancel := subscribe(t, srv, bus.SubscriberConfig{Consumer: spec, Concurrency: 16})
	c, err := js.Consumer(testCtx(t), bus.DefaultStream, spec.Durable)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, wait, func() error {
		info, err := c.Info(testCtx(t))
		if err != nil {
			return err
		}
		if info.NumWaiting == 0 {
			return errors.New("no pull request open yet")
		}
		return nil
	})
	cancel() // stop while the pull request is open; it stays open for up to a second
	const n = 3
	for i := range n {
		publish(t, js, "mem.acme.obs.u1.s1", "ev-"+strconv.Itoa(i), "x")
	}
	var deliveries []string
	for m := range msgs {
		deliveries = append(deliveries, m.Metadata.Get(bus.MetaDeliveryCount))
		m.Ack()
	}
	if want := []string{"1", "1", "1"}; !slices.Equal(deliveries, want) {
		t.Fatalf("delivery counts of the messages handed out after stop: %v, want %v", deliveries, want)
	}
	info, err := c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != n || info.NumRedelivered != 0 {
		t.Fatalf("ack floor %d, redelivered %d; want %d, 0", info.AckFloor.Stream, info.NumRedelivered, n)
	}
}

// subscribe starts a Subscriber on a new connection to srv with cfg (Conn set
// here) and subscribes it to its durable; cancel stops the subscription, and the
// test's end closes it.
func subscribe(t *testing.T, srv *server.Server, cfg bus.SubscriberConfig) (<-chan *message.Message, context.CancelFunc) {
	t.Helper()
	cfg.Conn = bustest.Connect(t, srv)
	sub, err := bus.NewSubscriber(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	msgs, err := sub.Subscribe(ctx, cfg.Consumer.Durable)
	if err != nil {
		t.Fatal(err)
	}
	return msgs, cancel
}

// With an OrderKey, the messages of one key are handed out one at a time in stream
// order, each once the one before it is settled, while other keys go on: of u1's
// three messages only the first is out until it is acked, and u2's, behind them in
// the stream, comes meanwhile (waiting messages hold none of the two slots).
func TestSubscriberHandsOutOneKeyInStreamOrder(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	for _, m := range []struct{ subject, id string }{
		{"mem.acme.obs.u1.s1", "a1"}, {"mem.acme.obs.u1.s2", "a2"}, {"mem.acme.obs.u1.s1", "a3"}, {"mem.acme.obs.u2.s1", "b1"},
	} {
		publish(t, js, m.subject, m.id, m.id)
	}
	byUser := func(subject string) string { return strings.Split(subject, ".")[3] }
	msgs, _ := subscribe(t, srv, bus.SubscriberConfig{Consumer: testSpec("ordered"), Concurrency: 2, OrderKey: byUser})
	next := func() *message.Message {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-time.After(wait):
			t.Fatal("no message handed out")
			return nil
		}
	}
	nothingElse := func(after string) {
		t.Helper()
		select {
		case m := <-msgs:
			t.Fatalf("after %s, %s was handed out before its turn", after, m.UUID)
		default:
		}
	}

	out := map[string]*message.Message{}
	for range 2 {
		m := next()
		out[m.UUID] = m
	}
	if out["a1"] == nil || out["b1"] == nil {
		t.Fatalf("first handed out %v, want a1 (u1's first) and b1 (u2's only)", slices.Sorted(maps.Keys(out)))
	}
	nothingElse("a1 and b1")
	out["b1"].Ack()
	prev := out["a1"]
	for _, want := range []string{"a2", "a3"} {
		nothingElse(prev.UUID + " still unsettled")
		prev.Ack()
		if m := next(); m.UUID != want {
			t.Fatalf("after %s was acked, %s was handed out, want %s", prev.UUID, m.UUID, want)
		} else {
			prev = m
		}
	}
	prev.Ack()
}
