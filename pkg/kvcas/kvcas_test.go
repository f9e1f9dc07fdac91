package kvcas_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/kvcas"
)

func TestEnsureKVCreatesThenUpdates(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	kv, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: "docs", History: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	kv, err = kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: "docs", History: 5})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 5 || st.Values() != 1 {
		t.Errorf("history %d values %d, want 5 and the 1 kept value", st.History(), st.Values())
	}
	if _, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: "bad.name"}); !errors.Is(err, kvcas.ErrProvision) {
		t.Errorf("bad bucket: got %v, want ErrProvision", err)
	}
}

// A request made while the server is gone gets no reply: a KV from EnsureKV gives
// it up after RequestTimeout, well before the caller's own deadline, so that the
// caller's retry can run on the new connection.
func TestEnsureKVBoundsEachRequest(t *testing.T) {
	srv, _, js := bustest.Provisioned(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	kv, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: "state"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()

	long, cancelLong := context.WithTimeout(t.Context(), 10*kvcas.RequestTimeout)
	defer cancelLong()
	_, err = kv.Get(long, "k")
	if !errors.Is(err, context.DeadlineExceeded) || long.Err() != nil {
		t.Fatalf("get with the server gone: %v (caller's context: %v); want the request's own deadline, the caller's still running", err, long.Err())
	}
	_, err = kvcas.UpdateKV(long, kv, "k", 2, func([]byte, bool) ([]byte, error) { return []byte("w"), nil })
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kvcas.ErrCASConflict) || long.Err() != nil {
		t.Fatalf("update with the server gone: %v; want both attempts to time out on their own, not a conflict", err)
	}
}
