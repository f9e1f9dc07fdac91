// Package kvcas is read-modify-write with compare-and-set on JetStream KV keys
// (UpdateKV: retried with jittered backoff when another writer wins the race), and
// KV bucket provisioning (EnsureKV). It is the KV side of what pkg/bus was, so
// stores that keep state in KV (session, docstore) need no Watermill plumbing.
package kvcas

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/clock"
)

// Sentinel errors; the errors of this package wrap them with the key or bucket.
var (
	// ErrCASConflict is returned by UpdateKV when the key kept changing under every attempt.
	ErrCASConflict = errors.New("kvcas: key changed under every compare-and-set attempt")
	// ErrProvision is returned by EnsureKV when a bucket cannot be created or updated.
	ErrProvision = errors.New("kvcas: provision")
	// ErrNoReply marks a request that got no reply within RequestTimeout while
	// its caller's context had time left: the server went away, or the stream
	// has no leader (a cluster electing one). It also matches
	// context.DeadlineExceeded.
	ErrNoReply = errors.New("kvcas: no reply within the request timeout")
	// ErrUncommitted is returned by UpdateKV when every compare-and-set lost
	// against a revision the reads never showed: a write still being proposed
	// by a stream leader without quorum, not another writer winning the race.
	ErrUncommitted = errors.New("kvcas: the key's last write is not committed")
)

// DefaultKVUpdateAttempts bounds UpdateKV's retries; contention in agentmem is a handful
// of writers per key, so hitting the bound means something is wrong, not busy.
const DefaultKVUpdateAttempts = 100

// RequestTimeout bounds one JetStream request within a longer operation: a KV
// read or write, a stream read, a publish's ack. A request made as the server
// goes away gets no reply, and waiting out the caller's deadline (a handler's
// 30 s) stalled every worker that long after a nats-server restart; failed after
// this, the caller's retry runs on the new connection.
const RequestTimeout = 5 * time.Second

// WithRequestTimeout is ctx bounded by RequestTimeout (or its own, earlier, deadline).
func WithRequestTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, RequestTimeout)
}

const (
	casBackoffBase = 500 * time.Microsecond
	casBackoffMax  = 50 * time.Millisecond
)

// UpdateKV is a read-modify-write of one KV key with compare-and-set on its revision:
// fn gets the current value (exists=false when the key is missing or deleted) and
// returns the new one; on a lost race the value is re-read and fn called again after a
// full-jitter pause, so fn must be pure. A request that gets no reply within
// RequestTimeout is an attempt too, made again while ctx lasts. If fn returns an error nothing is written and
// the error is returned as is. The new revision is returned.
func UpdateKV(ctx context.Context, kv jetstream.KeyValue, key string, attempts int, fn func(old []byte, exists bool) ([]byte, error)) (uint64, error) {
	if attempts <= 0 {
		attempts = DefaultKVUpdateAttempts
	}
	// A write that timed out may still have been applied: the next attempt's
	// compare-and-set then sees its revision and fn decides again on its value.
	kv = Bounded(kv)
	var (
		noReply    error // the last attempt's, when it timed out
		unanswered error // the latest request of any attempt that timed out
		// stuck: the last compare-and-set lost at the revision the one before
		// lost at too (0: the key was missing); seen is that revision.
		stuck bool
		seen  = ^uint64(0)
	)
	for attempt := range attempts {
		noReply = nil
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
		case RequestTimedOut(ctx, err):
			noReply, unanswered = err, err
			continue
		case unanswered != nil && ctx.Err() != nil:
			return 0, stillNoReply(key, unanswered)
		default:
			return 0, fmt.Errorf("kvcas: read key %s: %w", key, err)
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
		if RequestTimedOut(ctx, err) {
			noReply, unanswered = err, err
			continue
		}
		if unanswered != nil && ctx.Err() != nil {
			return 0, stillNoReply(key, unanswered)
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("kvcas: write key %s: %w", key, err)
		}
		stuck, seen = revision == seen, revision
		if err := clock.Sleep(ctx, casBackoff(attempt)); err != nil {
			if stuck {
				return 0, fmt.Errorf("%w: key %s, revision %d: %w", ErrUncommitted, key, revision, err)
			}
			return 0, fmt.Errorf("kvcas: update key %s: %w", key, err)
		}
	}
	switch {
	case noReply != nil:
		return 0, fmt.Errorf("kvcas: update key %s: no reply within %s, %d attempts: %w", key, RequestTimeout, attempts, noReply)
	case stuck:
		return 0, fmt.Errorf("%w: key %s stayed at revision %d through %d attempts", ErrUncommitted, key, seen, attempts)
	}
	return 0, fmt.Errorf("%w: %s, %d attempts", ErrCASConflict, key, attempts)
}

// stillNoReply is UpdateKV's error when the caller's context ended after some
// request got no reply: the stream is likely still without a leader, which is
// not the caller running out of time (ErrNoReply, which last wraps, says so).
func stillNoReply(key string, last error) error {
	return fmt.Errorf("kvcas: update key %s: no reply before the caller's deadline: %w", key, last)
}

// RequestTimedOut reports a request that ran out of RequestTimeout while ctx
// itself has time left: worth another attempt.
func RequestTimedOut(ctx context.Context, err error) bool {
	return ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
}

// NoReply returns err, the error of a request made with WithRequestTimeout(ctx),
// marked with ErrNoReply when it is RequestTimeout that ran out (RequestTimedOut):
// callers up the stack (the bus Router) then tell a stream without a leader
// from a handler out of time, which both end in context.DeadlineExceeded.
func NoReply(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrNoReply) || !RequestTimedOut(ctx, err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNoReply, err)
}

// casBackoff is a full-jitter exponential pause: uniform in [0, min(max, base·2^attempt)).
func casBackoff(attempt int) time.Duration {
	d := casBackoffMax
	if attempt < 16 {
		d = min(casBackoffBase<<attempt, casBackoffMax)
	}
	return rand.N(d) + time.Microsecond
}

// EnsureKV creates the key-value bucket of cfg, or updates it to cfg.
func EnsureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: key-value bucket %q: %w", ErrProvision, cfg.Bucket, err)
	}
	return Bounded(kv), nil
}

// EraseStream removes every message of stream whose subject matches filter
// (wildcards allowed), history and delete markers included, and returns how many
// subjects and messages it removed. Where the stream allows deleting messages,
// each is first erased (JetStream's secure delete overwrites its record in the
// block file with random bytes: a plain delete or purge only marks it, and its
// bytes stay on disk until the server compacts the block); then the filter is
// purged, for what arrived meanwhile. A KV bucket's stream denies deletes, for
// good: its messages are purged only. A missing stream has nothing to remove.
// The counts are read first: a message published in between is removed without
// being counted.
func EraseStream(ctx context.Context, js jetstream.JetStream, stream, filter string) (subjects, msgs int, err error) {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("kvcas: stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, 0, fmt.Errorf("kvcas: stream %s, subjects %s: %w", stream, filter, err)
	}
	for _, n := range info.State.Subjects {
		subjects++
		msgs += int(n)
	}
	if msgs == 0 {
		return 0, 0, nil
	}
	if !info.Config.DenyDelete {
		if err := eraseMsgs(ctx, s, filter, msgs); err != nil {
			return 0, 0, fmt.Errorf("kvcas: erase %s from stream %s: %w", filter, stream, err)
		}
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(filter)); err != nil {
		return 0, 0, fmt.Errorf("kvcas: purge %s from stream %s: %w", filter, stream, err)
	}
	return subjects, msgs, nil
}

// eraseMsgs securely deletes the messages of s on filter, up to want of them,
// found with an ordered consumer that delivers headers only.
func eraseMsgs(ctx context.Context, s jetstream.Stream, filter string, want int) error {
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, HeadersOnly: true})
	if err != nil {
		return err
	}
	for erased := 0; erased < want; {
		batch, err := c.Fetch(min(want-erased, eraseBatch), jetstream.FetchMaxWait(eraseFetchWait))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if err := s.SecureDeleteMsg(ctx, md.Sequence.Stream); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("message %d: %w", md.Sequence.Stream, err)
			}
			n++
			if md.NumPending == 0 {
				return batch.Error()
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			return nil // removed meanwhile (a concurrent erase or the stream's limits)
		}
		erased += n
	}
	return nil
}

// eraseBatch is how many message headers eraseMsgs fetches at a time;
// eraseFetchWait how long it waits for them.
const (
	eraseBatch     = 256
	eraseFetchWait = 5 * time.Second
)

// PurgeKeys removes the keys of bucket that match each filter (KV key patterns
// with * and >), with their whole history and no delete marker left behind, and
// returns how many keys it removed. A missing bucket has none.
func PurgeKeys(ctx context.Context, js jetstream.JetStream, bucket string, filters ...string) (int, error) {
	total := 0
	for _, f := range filters {
		n, _, err := EraseStream(ctx, js, "KV_"+bucket, "$KV."+bucket+"."+f)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
