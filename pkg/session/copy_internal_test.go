package session

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

var errLost = errors.New("connection lost")

// purgeFails is a real KV bucket whose purge of one key fails, as a server
// that went away in the middle of a swap makes it fail.
type purgeFails struct {
	jetstream.KeyValue
	key string
}

func (p purgeFails) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if key == p.key {
		return errLost
	}
	return p.KeyValue.Purge(ctx, key, opts...)
}

func sessions(t *testing.T, s *Store, ids ...string) {
	t.Helper()
	for i, id := range ids {
		env := events.New(events.TypeObservation, "acme", "u1", "bot", id)
		env.TS = time.Date(2026, 11, 22, 10, i, 0, 0, time.UTC)
		env.Observation = &events.Observation{Role: events.RoleUser, Text: "message of " + id}
		if _, _, err := s.Apply(context.Background(), env); err != nil {
			t.Fatal(err)
		}
	}
}

// A rebuild swaps the user's sessions in one step: a failure midway (the purge
// of a session the rebuild does not have) puts back what was written, and the
// swap that succeeds leaves exactly the rebuilt sessions.
func TestReplaceUserSwapsOrLeavesTheSessionsAlone(t *testing.T) {
	ctx := context.Background()
	state, _ := userKeys("acme", "u1")
	read := func(s *Store) map[string][]byte {
		t.Helper()
		m, err := entries(ctx, s.state, state)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	_, _, liveJS := bustest.Provisioned(t)
	target, err := New(ctx, Config{}, liveJS, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, rebuiltJS := bustest.Provisioned(t)
	rebuilt, err := New(ctx, Config{}, rebuiltJS, nil)
	if err != nil {
		t.Fatal(err)
	}
	sessions(t, target, "s2", "s3")
	sessions(t, rebuilt, "s1", "s2", "s2")
	before, want := read(target), read(rebuilt)

	bucket := target.state
	target.state = purgeFails{bucket, "acme.u1.s3"}
	if _, err := target.ReplaceUser(ctx, rebuilt, "acme", "u1"); !errors.Is(err, errLost) || !strings.Contains(err.Error(), "as they were") {
		t.Fatalf("ReplaceUser with a purge failing: %v; want the failure, the sessions said to be as they were", err)
	}
	if got := read(target); !maps.EqualFunc(got, before, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("after a failed swap the sessions are %v; want them as they were: %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(before)))
	}
	target.state = bucket
	if n, err := target.ReplaceUser(ctx, rebuilt, "acme", "u1"); err != nil || n != len(want) {
		t.Fatalf("ReplaceUser = %d, %v; want %d entries", n, err, len(want))
	}
	if got := read(target); !maps.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("after the swap the sessions are %v; want the rebuilt ones %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}
