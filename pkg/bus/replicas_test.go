package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// TestWithReplicasAppliesToEveryStreamBucketAndStore: on a 3-node cluster, each
// way of creating or updating a stream, a KV bucket or an object store through
// WithReplicas gets its replica count, whatever the caller's config asked for.
func TestWithReplicasAppliesToEveryStreamBucketAndStore(t *testing.T) {
	_, urls := bustest.StartCluster(t, 3)
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	raw, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	js := bus.WithReplicas(raw, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type step struct {
		stream string // the stream the step provisions
		run    func() error
	}
	stream := func(name string) jetstream.StreamConfig {
		return jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 1}
	}
	steps := map[string]step{
		"CreateStream":         {"S1", func() error { _, err := js.CreateStream(ctx, stream("S1")); return err }},
		"CreateOrUpdateStream": {"S2", func() error { _, err := js.CreateOrUpdateStream(ctx, stream("S2")); return err }},
		"UpdateStream": {"S3", func() error {
			if _, err := raw.CreateStream(ctx, stream("S3")); err != nil {
				return err
			}
			_, err := js.UpdateStream(ctx, stream("S3"))
			return err
		}},
		"CreateKeyValue": {"KV_b1", func() error {
			_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b1", Replicas: 1})
			return err
		}},
		"CreateOrUpdateKeyValue": {"KV_b2", func() error {
			_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b2", Replicas: 1})
			return err
		}},
		"UpdateKeyValue": {"KV_b3", func() error {
			if _, err := raw.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b3"}); err != nil {
				return err
			}
			_, err := js.UpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b3", Replicas: 1})
			return err
		}},
		"CreateObjectStore": {"OBJ_o1", func() error {
			_, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "o1", Replicas: 1})
			return err
		}},
		"CreateOrUpdateObjectStore": {"OBJ_o2", func() error {
			_, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "o2", Replicas: 1})
			return err
		}},
		"UpdateObjectStore": {"OBJ_o3", func() error {
			if _, err := raw.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "o3"}); err != nil {
				return err
			}
			_, err := js.UpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "o3", Replicas: 1})
			return err
		}},
	}
	for name, s := range steps {
		if err := s.run(); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		st, err := raw.Stream(ctx, s.stream)
		if err != nil {
			t.Fatalf("%s: stream %s: %v", name, s.stream, err)
		}
		if got := st.CachedInfo().Config.Replicas; got != 3 {
			t.Errorf("%s: stream %s has %d replicas, want 3", name, s.stream, got)
		}
	}
}
