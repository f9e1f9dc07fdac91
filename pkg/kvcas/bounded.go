package kvcas

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Bounded returns kv with each single-key request bounded by RequestTimeout, so
// that one made as the server goes away fails after seconds and its caller's
// retry runs on the new connection, instead of it waiting out the caller's whole
// deadline; such a failure wraps ErrNoReply. Watches and listings are kv's own.
func Bounded(kv jetstream.KeyValue) jetstream.KeyValue {
	if _, ok := kv.(boundedKV); ok {
		return kv
	}
	return boundedKV{kv}
}

type boundedKV struct{ jetstream.KeyValue }

func (b boundedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	v, err := b.KeyValue.Get(reqCtx, key)
	return v, NoReply(ctx, err)
}

func (b boundedKV) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	v, err := b.KeyValue.GetRevision(reqCtx, key, revision)
	return v, NoReply(ctx, err)
}

func (b boundedKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	v, err := b.KeyValue.Put(reqCtx, key, value)
	return v, NoReply(ctx, err)
}

func (b boundedKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	v, err := b.KeyValue.PutString(reqCtx, key, value)
	return v, NoReply(ctx, err)
}

func (b boundedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	v, err := b.KeyValue.Create(reqCtx, key, value, opts...)
	return v, NoReply(ctx, err)
}

func (b boundedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	v, err := b.KeyValue.Update(reqCtx, key, value, revision)
	return v, NoReply(ctx, err)
}

func (b boundedKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return NoReply(ctx, b.KeyValue.Delete(reqCtx, key, opts...))
}

func (b boundedKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	return NoReply(ctx, b.KeyValue.Purge(reqCtx, key, opts...))
}
