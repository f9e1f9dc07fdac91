package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProvisionStreamsIsIdempotent(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	ctx := testCtx(t)
	if err := bus.ProvisionStreams(ctx, js, bus.StreamConfig{}); err != nil {
		t.Fatalf("second provisioning: %v", err)
	}
	for name, subject := range map[string]string{bus.DefaultStream: "mem.>", bus.DefaultDLQStream: "memdlq.>"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		cfg := s.CachedInfo().Config
		if !slices.Equal(cfg.Subjects, []string{subject}) || cfg.Storage != jetstream.FileStorage ||
			cfg.Duplicates != bus.DefaultDuplicateWindow || cfg.MaxAge != 0 {
			t.Errorf("stream %s: subjects %v storage %v duplicates %s max age %s", name, cfg.Subjects, cfg.Storage, cfg.Duplicates, cfg.MaxAge)
		}
	}
	// An update applies: a max age on the event stream.
	if err := bus.ProvisionStreams(ctx, js, bus.StreamConfig{MaxAge: time.Hour}); err != nil {
		t.Fatalf("update: %v", err)
	}
	s, _ := js.Stream(ctx, bus.DefaultStream)
	if got := s.CachedInfo().Config.MaxAge; got != time.Hour {
		t.Errorf("MaxAge after update = %s, want 1h", got)
	}
}

func TestStreamConfigValidate(t *testing.T) {
	for name, cfg := range map[string]bus.StreamConfig{
		"wildcard name":         {Name: "MEM.>"},
		"same names":            {Name: "X", DLQName: "X"},
		"window beyond max age": {MaxAge: time.Minute, DuplicateWindow: time.Hour},
		"negative age":          {MaxAge: -time.Second},
	} {
		if err := cfg.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestDuplicatePublishesAreStoredOnce(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	pub, err := bus.NewPublisher(bus.PublisherConfig{Conn: nc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := message.NewMessage("01JD3QEVENT", []byte(`{"id":"01JD3QEVENT"}`))
	for range 3 {
		if err := pub.Publish("mem.acme.obs.u1.s1", msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	// Different UUIDs, same explicit Nats-Msg-Id: also one.
	for i := range 2 {
		m := message.NewMessage(fmt.Sprintf("uuid-%d", i), []byte("x"))
		m.Metadata.Set(jetstream.MsgIDHeader, "explicit-id")
		if err := pub.Publish("mem.acme.obs.u1.s1", m); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	info, err := streamInfo(t, js, bus.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2 (one per Nats-Msg-Id)", info.State.Msgs)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("mem.acme.obs.u1.s1", msg); !errors.Is(err, bus.ErrClosed) {
		t.Fatalf("publish after close: %v, want ErrClosed", err)
	}
	if nc.IsClosed() {
		t.Fatal("Close closed a connection the publisher does not own")
	}
}

func TestPublishRejectsBadTopicsAndHeaders(t *testing.T) {
	_, nc, _ := bustest.Provisioned(t)
	pub, err := bus.NewPublisher(bus.PublisherConfig{Conn: nc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"", "mem.*.obs", "mem.>", "mem..x", "mem x"} {
		if err := pub.Publish(topic, message.NewMessage("a", nil)); !errors.Is(err, bus.ErrPublish) {
			t.Errorf("topic %q: got %v, want ErrPublish", topic, err)
		}
	}
	m := message.NewMessage("b", nil)
	m.Metadata.Set("bad key", "v")
	if err := pub.Publish("mem.acme.obs.u1.s1", m); !errors.Is(err, bus.ErrPublish) {
		t.Errorf("bad header key: got %v, want ErrPublish", err)
	}
	// No stream for the subject: the missing PubAck is an error, not a silent loss.
	if err := pub.Publish("nostream.x", message.NewMessage("c", nil)); !errors.Is(err, bus.ErrPublish) {
		t.Errorf("no stream: got %v, want ErrPublish", err)
	}
}

// Property: payload and metadata reach the stream unchanged, with the UUID as
// Nats-Msg-Id. (NATS header values lose leading and trailing blanks, so the drawn
// values have none.)
func TestPublishedMessagesRoundTrip(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	pub, err := bus.NewPublisher(bus.PublisherConfig{Conn: nc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	stream, err := js.Stream(ctx, bus.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		payload := rapid.SliceOf(rapid.Byte()).Draw(rt, "payload")
		md := rapid.MapOf(rapid.StringMatching(`[a-z][A-Za-z0-9_-]{0,15}`), rapid.StringMatching(`([!-~]([ -~]{0,38}[!-~])?)?`)).Draw(rt, "metadata")
		msg := message.NewMessage("id-"+strconv.Itoa(n), payload)
		for k, v := range md {
			msg.Metadata.Set(k, v)
		}
		if err := pub.Publish("mem.acme.obs.u1.s1", msg); err != nil {
			rt.Fatalf("publish: %v", err)
		}
		raw, err := stream.GetLastMsgForSubject(ctx, "mem.acme.obs.u1.s1")
		if err != nil {
			rt.Fatal(err)
		}
		if string(raw.Data) != string(payload) {
			rt.Fatalf("payload %q, want %q", raw.Data, payload)
		}
		if got := raw.Header.Get(jetstream.MsgIDHeader); got != msg.UUID {
			rt.Fatalf("Nats-Msg-Id %q, want %q", got, msg.UUID)
		}
		for k, v := range md {
			if got := raw.Header.Get(k); got != v {
				rt.Fatalf("header %s = %q, want %q", k, got, v)
			}
		}
	})
}

func TestConsumerSpecValidate(t *testing.T) {
	ok := bus.ConsumerSpec{Durable: "d", FilterSubjects: []string{"mem.>"}}
	for name, mutate := range map[string]func(*bus.ConsumerSpec){
		"no durable":               func(s *bus.ConsumerSpec) { s.Durable = "" },
		"dotted durable":           func(s *bus.ConsumerSpec) { s.Durable = "a.b" },
		"no filter":                func(s *bus.ConsumerSpec) { s.FilterSubjects = nil },
		"empty token filter":       func(s *bus.ConsumerSpec) { s.FilterSubjects = []string{"mem..x"} },
		"ack wait not backoff[0]":  func(s *bus.ConsumerSpec) { s.AckWait, s.BackOff = 30*time.Second, []time.Duration{time.Second} },
		"negative ack wait":        func(s *bus.ConsumerSpec) { s.AckWait = -1 },
		"zero backoff":             func(s *bus.ConsumerSpec) { s.BackOff = []time.Duration{0} },
		"max deliver below -1":     func(s *bus.ConsumerSpec) { s.MaxDeliver = -2 },
		"negative max ack pending": func(s *bus.ConsumerSpec) { s.MaxAckPending = -1 },
	} {
		s := ok
		mutate(&s)
		if err := s.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid spec: %v", err)
	}
}

// Property: nats-server accepts every spec Validate accepts, and stores it unchanged
// (in particular it never silently replaces the AckWait).
func TestValidatedConsumerSpecsAreStoredUnchanged(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	ctx := testCtx(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		secs := rapid.SliceOfN(rapid.IntRange(0, 90), 0, 4).Draw(rt, "backoff")
		spec := bus.ConsumerSpec{
			Durable:        "prop-" + strconv.Itoa(n),
			FilterSubjects: []string{"mem.*.obs.*.*"},
			AckWait:        time.Duration(rapid.IntRange(0, 90).Draw(rt, "ackWait")) * time.Second,
			MaxDeliver:     rapid.IntRange(-1, 6).Draw(rt, "maxDeliver"),
			MaxAckPending:  rapid.IntRange(0, 2000).Draw(rt, "maxAckPending"),
		}
		for _, s := range secs {
			spec.BackOff = append(spec.BackOff, time.Duration(s)*time.Second)
		}
		if rapid.Bool().Draw(rt, "ackWaitIsFirstBackOff") && len(spec.BackOff) > 0 {
			spec.AckWait = spec.BackOff[0]
		}
		if spec.Validate() != nil {
			return
		}
		c, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, spec)
		if err != nil {
			rt.Fatalf("server rejected a validated spec %+v: %v", spec, err)
		}
		got := c.CachedInfo().Config
		wantAck := spec.AckWait
		switch {
		case len(spec.BackOff) > 0:
			wantAck = spec.BackOff[0]
		case wantAck == 0:
			wantAck = 30 * time.Second
		}
		if got.AckWait != wantAck || !slices.Equal(got.BackOff, spec.BackOff) || got.AckPolicy != jetstream.AckExplicitPolicy {
			rt.Fatalf("stored ack wait %s backoff %v policy %v, want %s %v explicit", got.AckWait, got.BackOff, got.AckPolicy, wantAck, spec.BackOff)
		}
		// The Router enforces MaxDeliver; the server must never drop a message.
		if got.MaxDeliver != -1 {
			rt.Fatalf("stored max deliver %d, want -1 (unlimited)", got.MaxDeliver)
		}
		if err := js.DeleteConsumer(ctx, bus.DefaultStream, spec.Durable); err != nil {
			rt.Fatal(err)
		}
	})
}

func TestWorkerConsumers(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	ctx := testCtx(t)
	want := map[string][]string{
		bus.WorkerIngest:       {"mem.*.obs.*.*", "mem.*.write.*"},
		bus.WorkerExtractor:    {"mem.*.ended.*.*", "mem.*.summary.*.*"},
		bus.WorkerConsolidator: {"mem.*.hit.*", "mem.*.written.*", "mem.*.consolidate.*"},
	}
	for worker, filters := range want {
		spec := bus.WorkerConsumer(worker, bus.ConsumerDefaults{})
		if spec.Durable != "agentmem-"+worker || !slices.Equal(spec.FilterSubjects, filters) {
			t.Errorf("%s: durable %s filters %v", worker, spec.Durable, spec.FilterSubjects)
		}
		// Only ingest, which reads nearly every event, filters on the client.
		if spec.FilterOnClient != (worker == bus.WorkerIngest) {
			t.Errorf("%s: FilterOnClient %v", worker, spec.FilterOnClient)
		}
		// ... and claims the subjects no worker's filter matches, so each is
		// dead-lettered exactly once.
		if spec.ClaimUnrouted != (worker == bus.WorkerIngest) {
			t.Errorf("%s: ClaimUnrouted %v", worker, spec.ClaimUnrouted)
		}
		c, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, spec)
		if err != nil {
			t.Fatalf("%s: %v", worker, err)
		}
		cfg := c.CachedInfo().Config
		if spec.MaxDeliver != 5 || cfg.AckWait != 30*time.Second || cfg.MaxDeliver != -1 || len(cfg.BackOff) != 3 ||
			cfg.DeliverPolicy != jetstream.DeliverAllPolicy || cfg.AckPolicy != jetstream.AckExplicitPolicy {
			t.Errorf("%s: stored %+v", worker, cfg)
		}
		// Provisioning again (every replica does at start-up) is a no-op.
		if _, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, spec); err != nil {
			t.Fatalf("%s again: %v", worker, err)
		}
	}
	if _, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, bus.WorkerConsumer("nope", bus.ConsumerDefaults{})); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("unknown worker: got %v, want ErrInvalidConfig", err)
	}
}

// A durable that an earlier version created with the server enforcing MaxDeliver
// is updated in place to unlimited deliveries, keeping its position.
func TestProvisionLiftsAServerSideMaxDeliver(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	ctx := testCtx(t)
	spec := bus.WorkerConsumer(bus.WorkerExtractor, bus.ConsumerDefaults{})
	old := jetstream.ConsumerConfig{Durable: spec.Durable, FilterSubjects: spec.FilterSubjects, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: spec.AckWait, MaxDeliver: spec.MaxDeliver, BackOff: spec.BackOff}
	if _, err := js.CreateOrUpdateConsumer(ctx, bus.DefaultStream, old); err != nil {
		t.Fatal(err)
	}
	c, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.MaxDeliver; got != -1 {
		t.Fatalf("max deliver after provisioning %d, want -1", got)
	}
}

// KEDA reads the durable's lag from /jsz on the monitoring port.
func TestMonitoringServesConsumerLag(t *testing.T) {
	srv := bustest.StartServerWith(t, bus.EmbeddedConfig{MonitorListen: "127.0.0.1:0"})
	js := bustest.JetStream(t, srv)
	ctx := testCtx(t)
	if err := bus.ProvisionStreams(ctx, js, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{})); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "mem.acme.obs.u1.s1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// The monitoring view is refreshed asynchronously: poll it.
	bustest.Eventually(t, wait, func() error {
		resp, err := http.Get("http://" + srv.MonitorAddr().String() + "/jsz?consumers=true")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"agentmem-ingest"`) || !strings.Contains(string(body), `"num_pending": 1`) {
			return fmt.Errorf("/jsz: %d %s", resp.StatusCode, body)
		}
		return nil
	})
}

func streamInfo(t *testing.T, js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	t.Helper()
	ctx := testCtx(t)
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

func TestRoutedSubjects(t *testing.T) {
	for subject, routed := range map[string]bool{
		"mem.acme.obs.u1.s1": true, "mem.acme.ended.u1.s1": true, "mem.acme.hit.u1": true,
		"mem.acme.written.u1": true, "mem.acme.consolidate.u1": true,
		"mem.acme.obs.u1": false, "mem.acme.obs.u1.s1.extra": false, "mem.acme.ended.u1": false,
		"mem.acme.hit.u1.s1": false, "mem.acme.gossip.u1": false, "mem.acme": false,
	} {
		if got := bus.Routed(subject); got != routed {
			t.Errorf("Routed(%q) = %v, want %v", subject, got, routed)
		}
	}
	spec := bus.WorkerConsumer(bus.WorkerExtractor, bus.ConsumerDefaults{})
	spec.ClaimUnrouted = true
	if err := spec.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("ClaimUnrouted without FilterOnClient: Validate() = %v", err)
	}
}

// A durable provisioned by an older version (the extractor before summary_due)
// gets the new filters on the next start: ProvisionConsumer updates it.
func TestProvisionUpdatesAnExistingDurablesFilters(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	ctx := testCtx(t)
	spec := bus.WorkerConsumer(bus.WorkerExtractor, bus.ConsumerDefaults{})
	old := spec
	old.FilterSubjects = []string{"mem.*.ended.*.*"}
	if _, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, old); err != nil {
		t.Fatal(err)
	}
	c, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, spec)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Config.FilterSubjects, spec.FilterSubjects) {
		t.Fatalf("filters %v, want %v", info.Config.FilterSubjects, spec.FilterSubjects)
	}
}
