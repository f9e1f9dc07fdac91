package kvcas

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Bounded returns kv with each single-key request bounded by RequestTimeout, so
// that one made as the server goes away fails after seconds and its caller's
// retry runs on the new connection, instead of it waiting out the caller's whole
// deadline. Watches and listings are kv's own.
func Bounded(kv jetstream.KeyValue) jetstream.KeyValue {
	if _, ok := kv.(boundedKV); ok {
		return kv
	}
	return boundedKV{kv}
}

type boundedKV struct{ jetstream.KeyValue }

func (b boundedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.Get(ctx, key)
}

func (b boundedKV) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.GetRevision(ctx, key, revision)
}

func (b boundedKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.Put(ctx, key, value)
}

func (b boundedKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.PutString(ctx, key, value)
}

func (b boundedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.Create(ctx, key, value, opts...)
}

func (b boundedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.Update(ctx, key, value, revision)
}

func (b boundedKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.Delete(ctx, key, opts...)
}

func (b boundedKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return b.KeyValue.Purge(ctx, key, opts...)
}
