package session

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
)

// userKeys are the key filters of one user's entries in the state bucket (the
// states, summaries and reflection claims of the sessions, and the user's
// recent sessions) and in the turn bucket.
func userKeys(tenant, user string) (state, turns []string) {
	p := tenant + "." + user + ".*"
	return []string{p, "summary." + p, "reflected." + p, recentPrefix + p}, []string{p + ".*"}
}

// ReplaceUser makes the user's session state and turns in s those in from
// (what a rebuild made) in one swap: both sides are read first, every entry of
// from written over s's, then s's entries that from does not have purged. When
// a step fails, what was written or purged is put back, so the user's sessions
// are left as they were. It returns how many entries it copied.
func (s *Store) ReplaceUser(ctx context.Context, from *Store, tenant, user string) (int, error) {
	if err := errors.Join(events.ValidateID("tenant", tenant), events.ValidateID("user", user)); err != nil {
		return 0, fmt.Errorf("session: %w", err)
	}
	state, turns := userKeys(tenant, user)
	type bucket struct {
		dst        jetstream.KeyValue
		old, fresh map[string][]byte
	}
	var buckets []bucket
	n := 0
	for _, b := range []struct {
		dst, src jetstream.KeyValue
		filters  []string
	}{{s.state, from.state, state}, {s.turns, from.turns, turns}} {
		fresh, err := entries(ctx, b.src, b.filters)
		if err != nil {
			return 0, err
		}
		old, err := entries(ctx, b.dst, b.filters)
		if err != nil {
			return 0, err
		}
		buckets = append(buckets, bucket{b.dst, old, fresh})
		n += len(fresh)
	}
	type step struct {
		kv  jetstream.KeyValue
		key string
		old []byte
		had bool // whether the key had an entry: it gets old back, else it is purged
	}
	var done []step
	swap := func() error {
		for _, b := range buckets {
			for k, v := range b.fresh {
				s.cache.forget(k)
				old, had := b.old[k]
				done = append(done, step{b.dst, k, old, had})
				if _, err := b.dst.Put(ctx, k, v); err != nil {
					return fmt.Errorf("session: write %s: %w", k, err)
				}
			}
			for k, v := range b.old {
				if _, keep := b.fresh[k]; keep {
					continue
				}
				s.cache.forget(k)
				done = append(done, step{b.dst, k, v, true})
				if err := b.dst.Purge(ctx, k); err != nil {
					return fmt.Errorf("session: drop %s: %w", k, err)
				}
			}
		}
		return nil
	}
	err := swap()
	if err == nil {
		return n, nil
	}
	var errs []error
	for _, st := range slices.Backward(done) {
		var rerr error
		if st.had {
			_, rerr = st.kv.Put(ctx, st.key, st.old)
		} else {
			rerr = st.kv.Purge(ctx, st.key)
		}
		if rerr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", st.key, rerr))
		}
	}
	if rerr := errors.Join(errs...); rerr != nil {
		return 0, fmt.Errorf("%w; putting the sessions back failed too, they are half replaced: %w", err, rerr)
	}
	return 0, fmt.Errorf("%w; the sessions are as they were", err)
}

// entries reads the entries of kv whose keys match any of filters.
func entries(ctx context.Context, kv jetstream.KeyValue, filters []string) (map[string][]byte, error) {
	ks, err := keys(ctx, kv, filters)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(ks))
	for _, k := range ks {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("session: read %s: %w", k, err)
		}
		out[k] = e.Value()
	}
	return out, nil
}

// keys lists the keys of kv matching any of filters (wildcards allowed).
func keys(ctx context.Context, kv jetstream.KeyValue, filters []string) ([]string, error) {
	var out []string
	for _, f := range filters {
		w, err := kv.Watch(ctx, f, jetstream.MetaOnly(), jetstream.IgnoreDeletes())
		if err != nil {
			return nil, fmt.Errorf("session: list keys %s: %w", f, err)
		}
		// The watcher sends what the bucket holds, then nil.
		for e := range w.Updates() {
			if e == nil {
				break
			}
			out = append(out, e.Key())
		}
		if err := w.Stop(); err != nil {
			return nil, fmt.Errorf("session: list keys %s: %w", f, err)
		}
	}
	return out, nil
}
