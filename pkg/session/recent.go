package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/kvcas"
)

// A user's recent sessions, newest first, let the retriever find the session
// the user had before the one now asking (the hand-over between agents, issue
// 31) with one KV read rather than a listing of every session of the user. They
// are one key of the state bucket, "recent.<tenant>.<user>.sessions": four
// tokens, so stateOwner seals it with the user's key, and "recent." is never a
// state key's tenant (those have three tokens).
const recentPrefix = "recent."

func recentKey(tenant, user string) string { return recentPrefix + tenant + "." + user + ".sessions" }

// RecentSession is one of a user's recent sessions: which agent held it and
// when it started (its first event's time).
type RecentSession struct {
	SessionID string    `json:"session_id"`
	AgentID   string    `json:"agent_id,omitempty"`
	StartedTS time.Time `json:"started_ts"`
}

// newer orders recent sessions newest first, ties by session id.
func newer(a, b RecentSession) int {
	if c := b.StartedTS.Compare(a.StartedTS); c != 0 {
		return c
	}
	return strings.Compare(a.SessionID, b.SessionID)
}

// errNoChange aborts an UpdateKV of the recent sessions without writing.
var errNoChange = errors.New("no change")

// RecentSessions returns the user's recent sessions, newest first (at most
// Config.RecentSessions); none for a user without sessions.
func (s *Store) RecentSessions(ctx context.Context, tenant, user string) ([]RecentSession, error) {
	if err := validateUser(tenant, user); err != nil {
		return nil, err
	}
	e, err := s.state.Get(ctx, recentKey(tenant, user))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: recent sessions of %s/%s: %w", tenant, user, err)
	}
	var list []RecentSession
	if err := json.Unmarshal(e.Value(), &list); err != nil {
		return nil, fmt.Errorf("session: recent sessions of %s/%s are corrupt: %w", tenant, user, err)
	}
	return list, nil
}

// noteSession puts st's session among its user's recent sessions, in start
// order. A session already there, or older than every session kept, changes
// nothing; the sessions this Store noted are remembered, so a session costs
// one read-modify-write in its life, not one per batch. A corrupt list is
// replaced: it is derived from the states.
func (s *Store) noteSession(ctx context.Context, st State) error {
	skey := st.Tenant + "." + st.UserID + "." + st.SessionID
	if s.noted.Contains(skey) {
		return nil
	}
	entry := RecentSession{SessionID: st.SessionID, AgentID: st.AgentID, StartedTS: st.FirstTS}
	key := recentKey(st.Tenant, st.UserID)
	_, err := kvcas.UpdateKV(ctx, s.state, key, 0, func(old []byte, exists bool) ([]byte, error) {
		var list []RecentSession
		if exists {
			_ = json.Unmarshal(old, &list) // corrupt: start again
		}
		if slices.ContainsFunc(list, func(r RecentSession) bool { return r.SessionID == entry.SessionID }) {
			return nil, errNoChange
		}
		i, _ := slices.BinarySearchFunc(list, entry, newer)
		if i >= s.cfg.RecentSessions {
			return nil, errNoChange
		}
		list = slices.Insert(list, i, entry)
		return json.Marshal(list[:min(len(list), s.cfg.RecentSessions)])
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return fmt.Errorf("session: note %s among recent sessions: %w", skey, err)
	}
	s.noted.Add(skey, struct{}{})
	return nil
}

// forgetRecent takes a deleted session out of its user's recent sessions.
func (s *Store) forgetRecent(ctx context.Context, tenant, user, session string) error {
	s.noted.Remove(tenant + "." + user + "." + session)
	_, err := kvcas.UpdateKV(ctx, s.state, recentKey(tenant, user), 0, func(old []byte, exists bool) ([]byte, error) {
		var list []RecentSession
		if exists {
			_ = json.Unmarshal(old, &list)
		}
		n := len(list)
		list = slices.DeleteFunc(list, func(r RecentSession) bool { return r.SessionID == session })
		if len(list) == n {
			return nil, errNoChange
		}
		return json.Marshal(list)
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return fmt.Errorf("session: drop %s/%s/%s from recent sessions: %w", tenant, user, session, err)
	}
	return nil
}

// Previous returns the session the user had before session (the newest of
// recent when session is not among them, e.g. "" or one without events yet);
// ok is false when there is none.
func Previous(recent []RecentSession, session string) (prev RecentSession, ok bool) {
	i := slices.IndexFunc(recent, func(r RecentSession) bool { return r.SessionID == session })
	if i+1 >= len(recent) {
		return RecentSession{}, false
	}
	return recent[i+1], true
}
