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
