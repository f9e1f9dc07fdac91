package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// WithReplicas is js with every stream, key-value bucket and object store it
// creates or updates set to replicas (nats.stream.replicas), whatever the
// caller's config says. It is the one place the replica count is applied: the
// runtime hands it to every component, so a bucket added later cannot be left
// at R1 on a cluster (before, the extractor's and consolidator's buckets were).
// Consumers are left alone: one with Replicas 0 follows its stream.
func WithReplicas(js jetstream.JetStream, replicas int) jetstream.JetStream {
	return replicated{JetStream: js, replicas: replicas}
}

type replicated struct {
	jetstream.JetStream
	replicas int
}

func (r replicated) CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.CreateStream(ctx, cfg)
}

func (r replicated) UpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.UpdateStream(ctx, cfg)
}

func (r replicated) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.CreateOrUpdateStream(ctx, cfg)
}

func (r replicated) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.CreateKeyValue(ctx, cfg)
}

func (r replicated) UpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.UpdateKeyValue(ctx, cfg)
}

func (r replicated) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
}

func (r replicated) CreateObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.CreateObjectStore(ctx, cfg)
}

func (r replicated) UpdateObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.UpdateObjectStore(ctx, cfg)
}

func (r replicated) CreateOrUpdateObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	cfg.Replicas = r.replicas
	return r.JetStream.CreateOrUpdateObjectStore(ctx, cfg)
}
