package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/kvcas"
)

// TestStreamUnavailableWithoutQuorum: on a 3-node cluster that lost two nodes,
// an R3 bucket and stream have no leader, and their requests go unanswered
// (the followers hear them, nobody replies: no "no responders"). Each way our
// code meets that, a bounded KV write, a compare-and-set update that runs into
// its caller's deadline, an asynchronous publish with the runtime's ack
// timeout, must be StreamUnavailable, which the Router waits out: taken for a
// plain failure, a message was dead-lettered, or ingest stalled minutes on an
// ack that never came, while the cluster elected a leader.
func TestStreamUnavailableWithoutQuorum(t *testing.T) {
	servers, _ := bustest.StartCluster(t, 3)
	survivor := servers[0]
	nc := bustest.Connect(t, survivor)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(kvcas.RequestTimeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: "quorum", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	for _, srv := range servers[1:] {
		srv.Shutdown()
		srv.WaitForShutdown()
	}

	_, err = kv.Put(ctx, "k", []byte("v2"))
	check(t, "bounded KV put", err)

	// The caller's deadline ends while a request still goes unanswered.
	short, cancelShort := context.WithTimeout(ctx, kvcas.RequestTimeout+2*time.Second)
	_, err = kvcas.UpdateKV(short, kv, "k", 0, func(old []byte, _ bool) ([]byte, error) { return append(old, '+'), nil })
	cancelShort()
	check(t, "UpdateKV until the caller's deadline", err)

	f, err := js.PublishMsgAsync(&nats.Msg{Subject: "q.1", Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Ok():
		t.Fatal("asynchronous publish acked by a stream without quorum")
	case err = <-f.Err():
	case <-ctx.Done():
		t.Fatal("asynchronous publish: neither acked nor failed within a minute")
	}
	check(t, "asynchronous publish", err)
}

func check(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s on a bucket without quorum succeeded", what)
	case !bus.StreamUnavailable(err):
		t.Errorf("%s: %v: not StreamUnavailable, so the Router retries it a few times and dead-letters it", what, err)
	case strings.Contains(err.Error(), "no responders"):
		t.Logf("%s: %v (no responders, not the unanswered request this test is about)", what, err)
	default:
		t.Logf("%s: %v", what, err)
	}
}
