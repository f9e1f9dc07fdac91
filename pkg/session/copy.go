package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
)

// userKeys are the key filters of one user's entries in the state bucket (the
// states, summaries and reflection claims of the sessions) and in the turn bucket.
func userKeys(tenant, user string) (state, turns []string) {
	p := tenant + "." + user + ".*"
	return []string{p, "summary." + p, "reflected." + p}, []string{p + ".*"}
}

// ReplaceUser makes the user's session state and turns in s those in from
// (what a rebuild made): every entry of the user in s is deleted, then every
// entry in from is copied as it is. It returns how many entries it copied.
func (s *Store) ReplaceUser(ctx context.Context, from *Store, tenant, user string) (int, error) {
	if err := errors.Join(events.ValidateID("tenant", tenant), events.ValidateID("user", user)); err != nil {
		return 0, fmt.Errorf("session: %w", err)
	}
	state, turns := userKeys(tenant, user)
	n := 0
	for _, b := range []struct {
		dst, src jetstream.KeyValue
		filters  []string
	}{{s.state, from.state, state}, {s.turns, from.turns, turns}} {
		old, err := keys(ctx, b.dst, b.filters)
		if err != nil {
			return n, err
		}
		for _, k := range old {
			s.cache.forget(k)
			if err := b.dst.Purge(ctx, k); err != nil {
				return n, fmt.Errorf("session: drop %s: %w", k, err)
			}
		}
		fresh, err := keys(ctx, b.src, b.filters)
		if err != nil {
			return n, err
		}
		for _, k := range fresh {
			e, err := b.src.Get(ctx, k)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("session: read %s: %w", k, err)
			}
			s.cache.forget(k)
			if _, err := b.dst.Put(ctx, k, e.Value()); err != nil {
				return n, fmt.Errorf("session: write %s: %w", k, err)
			}
			n++
		}
	}
	return n, nil
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
