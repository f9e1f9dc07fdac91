package backup_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/backup"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// TestBeginWithMessagesInFlightFailsAndResumes: a consumer holding a message it
// does not acknowledge (a worker waiting out a model outage) makes the backup
// fail with ErrNotDrained, nothing copied, and the consumers and the writes are
// resumed; a second begin while one holds is refused.
func TestBeginWithMessagesInFlightFailsAndResumes(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.DefaultStream, jetstream.ConsumerConfig{Durable: "agentmem-ingest", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "mem.acme.obs.u1.s1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	var inFlight []jetstream.Msg // held, not acknowledged
	for m := range batch.Messages() {
		inFlight = append(inFlight, m)
	}
	vectors, err := embedded.New(embedded.Config{Path: filepath.Join(t.TempDir(), "v.db"), Dimensions: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = vectors.Close() }()
	var held, released atomic.Int32
	serve(ctx, t, backup.ServerConfig{Drain: 300 * time.Millisecond}, backup.ServerDeps{Conn: nc, JS: js, Vectors: vectors,
		HoldWrites: func() func() { held.Add(1); return func() { released.Add(1) } }})

	reply := begin(ctx, t, nc)
	if !strings.Contains(reply.Error, backup.ErrNotDrained.Error()) || !strings.Contains(reply.Error, "agentmem-ingest still has 1") {
		t.Fatalf("begin = %+v, want ErrNotDrained naming agentmem-ingest", reply)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Paused || held.Load() != 1 || released.Load() != 1 {
		t.Fatalf("after the failed begin: paused %v, writes held %d released %d; want resumed, 1 and 1", info.Paused, held.Load(), released.Load())
	}
	if _, err := js.ObjectStore(ctx, backup.ObjectBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("object store after a failed begin: %v, want none", err)
	}

	// Settled, the begin holds; a second one is refused while it does.
	for _, m := range inFlight {
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		if ci, err := cons.Info(ctx); err != nil || ci.NumAckPending > 0 {
			return errors.New("still pending")
		}
		return nil
	})
	first := begin(ctx, t, nc)
	if first.Error != "" || first.Cut.Consumers["agentmem-ingest"] != 1 {
		t.Fatalf("begin = %+v, want a cut with agentmem-ingest at 1", first)
	}
	if second := begin(ctx, t, nc); !strings.Contains(second.Error, backup.ErrBusy.Error()) {
		t.Fatalf("a second begin = %+v, want ErrBusy", second)
	}
}

// serve runs a backup server until the test ends.
func serve(ctx context.Context, t *testing.T, cfg backup.ServerConfig, deps backup.ServerDeps) {
	t.Helper()
	srv, err := backup.NewServer(cfg, deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
}

func begin(ctx context.Context, t *testing.T, nc *nats.Conn) backup.BeginReply {
	t.Helper()
	var msg *nats.Msg
	// Until Run has subscribed.
	bustest.Eventually(t, 10*time.Second, func() (err error) {
		msg, err = nc.RequestWithContext(ctx, backup.SubjectBegin, nil)
		return err
	})
	var r backup.BeginReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
