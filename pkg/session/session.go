// Package session keeps per-session state and the turn store (SPEC D3) in JetStream KV.
//
// State is what ingest learns from a session's observations: counts, the most recent
// messages (so a context pack's session history is one KV read, not a stream scan) and
// the ids of recently applied events, which makes redelivery a no-op. A message is
// kept as redact.Clean leaves it (no credential, no planted instruction); the event
// itself, in the stream, is what the agent published. Turns are one KV
// key each, "<tenant>.<user>.<session>.<turn_id>", so a session's turns list with one
// key filter.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/redact"
)

// ErrNotFound is returned for a session or turn that has no record.
var ErrNotFound = errors.New("session: not found")

// ErrEventIDReused reports an event whose id was applied before with other
// content: a producer bug or a forgery, never a redelivery. Ingest dead-letters it
// rather than let it overwrite what the first event wrote.
var ErrEventIDReused = errors.New("event id reused with different content")

// Outcome is what ApplyBatch did with one event.
type Outcome uint8

const (
	// Duplicate: applied before with the same content (a redelivery or a
	// republish, whatever its ts); nothing changed.
	Duplicate Outcome = iota
	// Applied: new, folded into the state now.
	Applied
	// Conflict: applied before with other content (ErrEventIDReused); nothing
	// changed.
	Conflict
)

// Config configures a Store.
type Config struct {
	StateBucket string // default "agentmem_sessions"
	TurnBucket  string // default "agentmem_turns"
	// RecentMessages is how many of the latest messages State keeps (default 64); it
	// bounds the session history a context pack can include.
	RecentMessages int
	// AppliedWindow is how many recent event ids State remembers for idempotency
	// (default 1024). Redelivery happens within seconds of the first delivery, and
	// duplicate publishes are already dropped by the stream's duplicate window.
	AppliedWindow int
	// CachedStates is how many sessions' last written states the Store remembers,
	// so that the next batch of such a session is one compare-and-set instead of a
	// read and a compare-and-set (default 1024).
	CachedStates int
	// RecentSessions is how many of a user's latest sessions the user's recent
	// sessions keep (default 8): the hand-over needs the one before the current.
	RecentSessions int
	// Keyring seals every value of a user in both buckets with the user's key,
	// which forget erases (kvcas.Sealed); nil keeps the values plain.
	Keyring *kvcas.Keyring
}

func (c *Config) setDefaults() {
	if c.StateBucket == "" {
		c.StateBucket = "agentmem_sessions"
	}
	if c.TurnBucket == "" {
		c.TurnBucket = "agentmem_turns"
	}
	if c.RecentMessages == 0 {
		c.RecentMessages = 64
	}
	if c.AppliedWindow == 0 {
		c.AppliedWindow = 1024
	}
	if c.CachedStates == 0 {
		c.CachedStates = 1024
	}
	if c.RecentSessions == 0 {
		c.RecentSessions = 8
	}
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.RecentMessages < 1 {
		return fmt.Errorf("session: RecentMessages is %d, must be >= 1", c.RecentMessages)
	}
	if c.AppliedWindow < 1 {
		return fmt.Errorf("session: AppliedWindow is %d, must be >= 1", c.AppliedWindow)
	}
	if c.CachedStates < 1 {
		return fmt.Errorf("session: CachedStates is %d, must be >= 1", c.CachedStates)
	}
	if c.RecentSessions < 2 {
		return fmt.Errorf("session: RecentSessions is %d, must be >= 2 (the current session and the one before)", c.RecentSessions)
	}
	return nil
}

// Message is one message observation as a context pack shows it.
type Message struct {
	EventID string         `json:"event_id"`
	Role    events.Role    `json:"role"`
	Text    string         `json:"text"` // redact.Clean of the observation's text
	TS      time.Time      `json:"ts"`
	Meta    map[string]any `json:"meta,omitempty"`
}

// State is what is known about one session.
type State struct {
	Tenant      string              `json:"tenant"`
	UserID      string              `json:"user_id"`
	SessionID   string              `json:"session_id"`
	AgentID     string              `json:"agent_id,omitempty"`
	Messages    int                 `json:"messages"` // message observations
	ByRole      map[events.Role]int `json:"by_role,omitempty"`
	ToolCalls   int                 `json:"tool_calls"`
	ToolResults int                 `json:"tool_results"`
	Turns       int                 `json:"turns"` // turns started
	FirstTS     time.Time           `json:"first_ts,omitzero"`
	LastTS      time.Time           `json:"last_ts,omitzero"`
	Recent      []Message           `json:"recent,omitempty"` // by event time, oldest first
	// Tokens is the estimated tokens of every message of the session
	// (EstimateTokens), for the session summary's trigger (SPEC B2).
	Tokens int `json:"tokens,omitempty"`
	// Applied holds the recent events, oldest first, as "<id> <digest>" (digest:
	// what the event says, ts aside; see events.Envelope.ContentDigest). An entry written before
	// digests existed is a bare id and matches that id whatever its content.
	Applied []string `json:"applied,omitempty"`
}

// Store is the session state and turn store.
type Store struct {
	cfg    Config
	js     jetstream.JetStream
	state  jetstream.KeyValue
	turns  jetstream.KeyValue
	cache  *stateCache
	noted  *lru.Cache[string, struct{}] // keys of the sessions noteSession put among the recent
	logger *zap.Logger
}

// New creates (or binds) the two KV buckets.
func New(ctx context.Context, cfg Config, js jetstream.JetStream, logger *zap.Logger) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	state, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: cfg.StateBucket, Storage: jetstream.FileStorage, Description: "agentmem session state"})
	if err != nil {
		return nil, fmt.Errorf("session: state bucket: %w", err)
	}
	turns, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: cfg.TurnBucket, Storage: jetstream.FileStorage, Description: "agentmem turns"})
	if err != nil {
		return nil, fmt.Errorf("session: turn bucket: %w", err)
	}
	state, turns = kvcas.Sealed(state, cfg.Keyring, stateOwner), kvcas.Sealed(turns, cfg.Keyring, kvcas.OwnerAt(0))
	cache, err := newStateCache(cfg.CachedStates)
	if err != nil {
		return nil, err
	}
	noted, err := lru.New[string, struct{}](cfg.CachedStates)
	if err != nil {
		return nil, fmt.Errorf("session: noted sessions: %w", err)
	}
	return &Store{cfg: cfg, js: js, state: state, turns: turns, cache: cache, noted: noted, logger: logger}, nil
}

// ErrMixedSessions is returned by ApplyBatch for events of more than one session.
var ErrMixedSessions = errors.New("session: batch spans more than one session")

// Apply folds one observation or session_ended event into its session's state and, for
// turn observations, into the turn store. It reports applied=false, changing nothing,
// when the event was applied before.
func (s *Store) Apply(ctx context.Context, env events.Envelope) (State, Outcome, error) {
	st, outcomes, err := s.ApplyBatch(ctx, env)
	if err != nil {
		return State{}, Duplicate, err
	}
	return st, outcomes[0], nil
}

// ApplyBatch folds events of one session into its state with one compare-and-set,
// exactly as Apply would one after the other: an event applied before, or earlier in
// envs, changes nothing. Turn observations applied now are then merged into the turn
// store. It returns the state and, per event, its Outcome.
func (s *Store) ApplyBatch(ctx context.Context, envs ...events.Envelope) (State, []Outcome, error) {
	if len(envs) == 0 {
		return State{}, nil, nil
	}
	first := envs[0]
	key, err := events.SessionKey(first.Tenant, first.UserID, first.SessionID)
	if err != nil {
		return State{}, nil, fmt.Errorf("session: apply %s: %w", first.ID, err)
	}
	for _, env := range envs[1:] {
		if env.Tenant != first.Tenant || env.UserID != first.UserID || env.SessionID != first.SessionID {
			return State{}, nil, fmt.Errorf("%w: %s and %s", ErrMixedSessions, first.ID, env.ID)
		}
	}
	outcomes := make([]Outcome, len(envs))
	st, err := s.applyState(ctx, key, envs, outcomes)
	if err != nil {
		return State{}, nil, fmt.Errorf("session: apply %s (%d events): %w", first.ID, len(envs), err)
	}
	// Also for a batch of duplicates: its first delivery may have failed here.
	if err := s.noteSession(ctx, st); err != nil {
		return st, outcomes, err
	}
	for i, env := range envs {
		if obs := env.Observation; outcomes[i] == Applied && obs != nil && obs.Turn != nil {
			if err := s.applyTurn(ctx, key, env); err != nil {
				return st, outcomes, err
			}
		}
	}
	return st, outcomes, nil
}

// applyState folds envs into key's state with one compare-and-set and returns the
// state. From the cached state (or a new one for a session not cached) it is one
// round trip; when that revision is stale (another replica, a Delete, a restart)
// it reads the key and tries again. The cache is trusted only for a write, which
// the compare-and-set checks: when the cached state says every event was applied,
// the stored one is read to make sure.
func (s *Store) applyState(ctx context.Context, key string, envs []events.Envelope, outcomes []Outcome) (State, error) {
	first := envs[0]
	st, revision, cached := s.cache.get(key)
	if !cached {
		st = State{Tenant: first.Tenant, UserID: first.UserID, SessionID: first.SessionID}
	}
	if s.foldNew(&st, envs, outcomes) {
		data, err := json.Marshal(st)
		if err != nil {
			return State{}, err
		}
		// Revision 0 (not cached) expects the key never written: a new session. Not
		// Create, which on an existing key spends a read on looking for a delete
		// marker before it fails.
		reqCtx, cancel := kvcas.WithRequestTimeout(ctx)
		revision, err = s.state.Update(reqCtx, key, data, revision)
		cancel()
		if err == nil {
			s.cache.put(key, revision, st)
			return st, nil
		}
		// A lost race, or no reply (the write may have been applied): the slow
		// path below reads the key again.
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) && !kvcas.RequestTimedOut(ctx, err) {
			s.cache.forget(key)
			return State{}, err
		}
	}
	revision, err := kvcas.UpdateKV(ctx, s.state, key, 0, func(old []byte, exists bool) ([]byte, error) {
		st = State{Tenant: first.Tenant, UserID: first.UserID, SessionID: first.SessionID}
		if exists {
			if err := json.Unmarshal(old, &st); err != nil {
				return nil, fmt.Errorf("session: state %s is corrupt: %w", key, err)
			}
		}
		if !s.foldNew(&st, envs, outcomes) {
			return nil, errAlreadyApplied
		}
		return json.Marshal(st)
	})
	switch {
	case errors.Is(err, errAlreadyApplied):
		// Nothing written, so no revision to cache: the next write reads again.
		s.cache.forget(key)
		return st, nil
	case err != nil:
		s.cache.forget(key)
		return State{}, err
	}
	s.cache.put(key, revision, st)
	return st, nil
}

// errAlreadyApplied aborts an UpdateKV without writing.
var errAlreadyApplied = errors.New("already applied")

// foldNew folds the events of envs that st has not applied yet, in order, setting
// their outcomes (which it resets first: UpdateKV may call it again). Applied keeps
// the AppliedWindow latest entries; seen mirrors it (id → digest) so that a batch
// costs one map lookup per event, not a scan of the window. It reports whether any
// was new.
func (s *Store) foldNew(st *State, envs []events.Envelope, outcomes []Outcome) bool {
	clear(outcomes)
	seen := make(map[string]string, len(st.Applied)+len(envs))
	for _, e := range st.Applied {
		id, digest, _ := strings.Cut(e, " ")
		seen[id] = digest
	}
	changed := false
	for i, env := range envs {
		digest := env.ContentDigest()
		if old, ok := seen[env.ID]; ok {
			if old != "" && old != digest {
				outcomes[i] = Conflict
			}
			continue
		}
		outcomes[i], changed = Applied, true
		s.fold(st, env)
		seen[env.ID] = digest
		st.Applied = append(st.Applied, env.ID+" "+digest)
		if over := len(st.Applied) - s.cfg.AppliedWindow; over > 0 {
			for _, e := range st.Applied[:over] {
				id, _, _ := strings.Cut(e, " ")
				delete(seen, id)
			}
			st.Applied = slices.Delete(st.Applied, 0, over)
		}
	}
	return changed
}

// fold applies one new event to st; foldNew keeps Applied.
func (s *Store) fold(st *State, env events.Envelope) {
	if st.AgentID == "" {
		st.AgentID = env.AgentID
	}
	if st.FirstTS.IsZero() || env.TS.Before(st.FirstTS) {
		st.FirstTS = env.TS
	}
	if env.TS.After(st.LastTS) {
		st.LastTS = env.TS
	}
	obs := env.Observation
	if obs == nil {
		return
	}
	switch obs.EffectiveKind() {
	case events.KindMessage:
		st.Messages++
		if st.ByRole == nil {
			st.ByRole = make(map[events.Role]int)
		}
		st.ByRole[obs.Role]++
		st.Tokens += EstimateTokens(obs.Text)
		// The state is memory too (episodes take their context from it, packs
		// show it): no credential or planted instruction is kept in clear. The
		// event stream keeps what the agent published.
		st.Recent = insertRecent(st.Recent, Message{EventID: env.ID, Role: obs.Role, Text: redact.Clean(obs.Text), TS: env.TS, Meta: obs.Meta}, s.cfg.RecentMessages)
	case events.KindToolCall:
		st.ToolCalls++
	case events.KindToolResult:
		st.ToolResults++
	case events.KindTurnStarted:
		st.Turns++
	}
}

// insertRecent keeps Recent ordered by event time (then id), whatever order the
// messages were applied in: replicas and concurrent handlers apply a session's
// messages out of order. Past max, the oldest are dropped.
func insertRecent(xs []Message, m Message, max int) []Message {
	i, _ := slices.BinarySearchFunc(xs, m, func(a, b Message) int {
		if c := a.TS.Compare(b.TS); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
	xs = slices.Insert(xs, i, m)
	if len(xs) > max {
		xs = slices.Delete(xs, 0, len(xs)-max)
	}
	return xs
}

// applyTurn records turn_started as a new running turn and merges turn_finished into it.
func (s *Store) applyTurn(ctx context.Context, sessionKey string, env events.Envelope) error {
	t := *env.Observation.Turn
	t.SessionKey = sessionKey
	if t.InputEventID == "" && env.Observation.EffectiveKind() == events.KindTurnStarted {
		t.InputEventID = env.ID
	}
	if t.StartedTS.IsZero() {
		t.StartedTS = env.TS
	}
	return s.mergeTurn(ctx, t)
}

// Get returns a session's state: one KV read, and a decode only when the state
// changed since this Store last wrote or read it.
func (s *Store) Get(ctx context.Context, tenant, user, session string) (State, error) {
	key, err := events.SessionKey(tenant, user, session)
	if err != nil {
		return State{}, fmt.Errorf("session: get: %w", err)
	}
	e, err := s.state.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return State{}, fmt.Errorf("%w: session %s", ErrNotFound, key)
	}
	if err != nil {
		return State{}, fmt.Errorf("session: get %s: %w", key, err)
	}
	// The state cache holds the states this Store last wrote or read, by revision:
	// a state unchanged since is a copy instead of a decode.
	if st, revision, ok := s.cache.get(key); ok && revision == e.Revision() {
		return st, nil
	}
	var st State
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return State{}, fmt.Errorf("session: state %s is corrupt: %w", key, err)
	}
	s.cache.putIfNewer(key, e.Revision(), st)
	return st, nil
}

// Delete removes a session's state and all its turns.
func (s *Store) Delete(ctx context.Context, tenant, user, session string) error {
	key, err := events.SessionKey(tenant, user, session)
	if err != nil {
		return fmt.Errorf("session: delete: %w", err)
	}
	if _, err := s.DeleteTurns(ctx, key); err != nil {
		return err
	}
	if err := s.deleteSummary(ctx, tenant, user, session); err != nil {
		return err
	}
	if err := s.forgetRecent(ctx, tenant, user, session); err != nil {
		return err
	}
	s.cache.forget(key)
	if err := s.state.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("session: delete %s: %w", key, err)
	}
	return nil
}
