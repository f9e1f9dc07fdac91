package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrCASConflict is returned by UpdateKV when the key kept changing under every attempt.
var ErrCASConflict = errors.New("bus: key changed under every compare-and-set attempt")

// DefaultKVUpdateAttempts bounds UpdateKV's retries; contention in agentmem is a handful
// of writers per key, so hitting the bound means something is wrong, not busy.
const DefaultKVUpdateAttempts = 100

const (
	casBackoffBase = 500 * time.Microsecond
	casBackoffMax  = 50 * time.Millisecond
)

// UpdateKV is a read-modify-write of one KV key with compare-and-set on its revision:
// fn gets the current value (exists=false when the key is missing or deleted) and
// returns the new one; on a lost race the value is re-read and fn called again after a
// full-jitter pause, so fn must be pure. If fn returns an error nothing is written and
// the error is returned as is. The new revision is returned.
func UpdateKV(ctx context.Context, kv jetstream.KeyValue, key string, attempts int, fn func(old []byte, exists bool) ([]byte, error)) (uint64, error) {
	if attempts <= 0 {
		attempts = DefaultKVUpdateAttempts
	}
	for attempt := range attempts {
		var (
			old      []byte
			revision uint64
			exists   bool
		)
		e, err := kv.Get(ctx, key)
		switch {
		case err == nil:
			old, revision, exists = e.Value(), e.Revision(), true
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// A deleted key reports not-found, but Create still sees its delete marker
			// as the last revision and succeeds, which is what we want.
		default:
			return 0, fmt.Errorf("bus: read key %s: %w", key, err)
		}
		data, err := fn(old, exists)
		if err != nil {
			return 0, err
		}
		var rev uint64
		if exists {
			rev, err = kv.Update(ctx, key, data, revision)
		} else {
			rev, err = kv.Create(ctx, key, data)
		}
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("bus: write key %s: %w", key, err)
		}
		if err := sleepCtx(ctx, casBackoff(attempt)); err != nil {
			return 0, fmt.Errorf("bus: update key %s: %w", key, err)
		}
	}
	return 0, fmt.Errorf("%w: %s, %d attempts", ErrCASConflict, key, attempts)
}

// casBackoff is a full-jitter exponential pause: uniform in [0, min(max, base·2^attempt)).
func casBackoff(attempt int) time.Duration {
	d := casBackoffMax
	if attempt < 16 {
		d = min(casBackoffBase<<attempt, casBackoffMax)
	}
	return rand.N(d) + time.Microsecond
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
