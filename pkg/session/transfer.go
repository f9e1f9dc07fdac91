package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/kvcas"
)

// A user's keys in the two buckets, for export, import and forget: the state
// bucket holds "<t>.<u>.<s>", "summary.<t>.<u>.<s>" and "reflected.<t>.<u>.<s>",
// the turn bucket "<t>.<u>.<s>.<turn>". The prefixes are spelled out rather
// than "*.<t>.<u>.*": that pattern would also match turn-shaped keys of a
// tenant named like this user's tenant's user.
var statePrefixes = map[string]string{
	events.SessionKVState:     "",
	events.SessionKVSummary:   "summary.",
	events.SessionKVReflected: "reflected.",
}

// stateOwner names the user of a state bucket key (statePrefixes).
func stateOwner(key string) (tenant, user string, ok bool) {
	p := strings.Split(key, ".")
	switch len(p) {
	case 3:
		return p[0], p[1], true
	case 4:
		return p[1], p[2], true
	}
	return "", "", false
}

// UserKeys lists the user's session values (without Value), sorted by kind,
// session and turn.
func (s *Store) UserKeys(ctx context.Context, tenant, user string) ([]events.SessionKV, error) {
	if err := validateUser(tenant, user); err != nil {
		return nil, err
	}
	var out []events.SessionKV
	for kind, prefix := range statePrefixes {
		keys, err := listKeys(ctx, s.state, prefix+tenant+"."+user+".*")
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			out = append(out, events.SessionKV{Kind: kind, SessionID: lastToken(k, 1)})
		}
	}
	keys, err := listKeys(ctx, s.turns, tenant+"."+user+".*.*")
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		out = append(out, events.SessionKV{Kind: events.SessionKVTurn, SessionID: lastToken(k, 2), TurnID: lastToken(k, 1)})
	}
	slices.SortFunc(out, func(a, b events.SessionKV) int { return strings.Compare(KVCursor(a), KVCursor(b)) })
	return out, nil
}

// KVCursor orders a user's session values: kind, session, turn.
func KVCursor(e events.SessionKV) string { return e.Kind + "/" + e.SessionID + "/" + e.TurnID }

// lastToken is the n-th dot-separated token of key counted from the end (1: the last).
func lastToken(key string, n int) string {
	parts := strings.Split(key, ".")
	return parts[len(parts)-n]
}

// ReadValue returns the stored value of e (a UserKeys entry); ErrNotFound when
// it went since it was listed.
func (s *Store) ReadValue(ctx context.Context, tenant, user string, e events.SessionKV) (json.RawMessage, error) {
	kv, key, err := s.kvKey(tenant, user, e)
	if err != nil {
		return nil, err
	}
	got, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("session: read %s: %w", key, err)
	}
	return got.Value(), nil
}

// Load stores e.Value for the user, replacing what its key holds, so loading
// twice is loading once; a state also goes among the user's recent sessions. A state or turn exported from another tenant or user
// is rewritten to name this one.
func (s *Store) Load(ctx context.Context, tenant, user string, e events.SessionKV) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("session: load: %w", err)
	}
	kv, key, err := s.kvKey(tenant, user, e)
	if err != nil {
		return err
	}
	data := []byte(e.Value)
	var st State
	switch e.Kind {
	case events.SessionKVState:
		if err := json.Unmarshal(data, &st); err != nil {
			return fmt.Errorf("session: load state of %s: %w", e.SessionID, err)
		}
		st.Tenant, st.UserID, st.SessionID = tenant, user, e.SessionID
		data, err = json.Marshal(st)
	case events.SessionKVTurn:
		var t events.TurnRecord
		if err := json.Unmarshal(data, &t); err != nil {
			return fmt.Errorf("session: load turn %s of %s: %w", e.TurnID, e.SessionID, err)
		}
		t.SessionKey, t.TurnID = tenant+"."+user+"."+e.SessionID, e.TurnID
		if err = t.Validate(); err == nil {
			data, err = json.Marshal(t)
		}
	}
	if err != nil {
		return fmt.Errorf("session: load %s: %w", key, err)
	}
	if _, err := kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("session: load %s: %w", key, err)
	}
	if e.Kind == events.SessionKVState {
		// The recent sessions are not exported: they are made again from the states.
		return s.noteSession(ctx, st)
	}
	return nil
}

// kvKey is the bucket and key of e for the user.
func (s *Store) kvKey(tenant, user string, e events.SessionKV) (jetstream.KeyValue, string, error) {
	key, err := events.SessionKey(tenant, user, e.SessionID)
	if err != nil {
		return nil, "", fmt.Errorf("session: %w", err)
	}
	if e.Kind == events.SessionKVTurn {
		k, err := turnKey(key, e.TurnID)
		return s.turns, k, err
	}
	prefix, ok := statePrefixes[e.Kind]
	if !ok {
		return nil, "", fmt.Errorf("session: unknown kind %q", e.Kind)
	}
	return s.state, prefix + key, nil
}

// DeleteUser removes every session value of the user from both buckets, history
// included (agentmem forget), and returns how many state keys (states,
// summaries, reflection claims, the recent sessions) and turns it removed.
func (s *Store) DeleteUser(ctx context.Context, tenant, user string) (keys, turns int, err error) {
	if err := validateUser(tenant, user); err != nil {
		return 0, 0, err
	}
	filters, _ := userKeys(tenant, user)
	if keys, err = kvcas.PurgeKeys(ctx, s.js, s.cfg.StateBucket, filters...); err != nil {
		return keys, 0, fmt.Errorf("session: forget %s/%s: %w", tenant, user, err)
	}
	if turns, err = kvcas.PurgeKeys(ctx, s.js, s.cfg.TurnBucket, tenant+"."+user+".*.*"); err != nil {
		return keys, turns, fmt.Errorf("session: forget %s/%s: %w", tenant, user, err)
	}
	return keys, turns, nil
}

// Users lists the users of tenant with session state.
func (s *Store) Users(ctx context.Context, tenant string) ([]string, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	keys, err := listKeys(ctx, s.state, tenant+".*.*")
	if err != nil {
		return nil, err
	}
	var users []string
	for _, k := range keys {
		users = append(users, lastToken(k, 2))
	}
	slices.Sort(users)
	return slices.Compact(users), nil
}

func validateUser(tenant, user string) error {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if err := events.ValidateID("user", user); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return nil
}

// listKeys lists the bucket's keys matching filter.
func listKeys(ctx context.Context, kv jetstream.KeyValue, filter string) ([]string, error) {
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("session: list %s: %w", filter, err)
	}
	defer func() { _ = lister.Stop() }()
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("session: list %s: %w", filter, err)
	}
	return keys, nil
}
