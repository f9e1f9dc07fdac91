package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
)

// ErrSummaryChanged reports a PutSummary that lost its compare-and-set: another
// handler wrote the session's summary since it was read.
var ErrSummaryChanged = errors.New("session: summary changed since it was read")

// Who wrote a Summary.
const (
	SummaryByLLM       = "llm"
	SummaryByRules     = "rules"
	SummaryByEmergency = "emergency" // the oldest half dropped, nothing summarised
	// SummaryByRulesFallback: the offline summary, made because the model's reply
	// was unusable or the model unavailable (records.ProcessedByRulesFallback).
	SummaryByRulesFallback = "rules_fallback"
)

// Summary is a session's running summary (SPEC B2). It stands for every message
// of the session up to and including the one named by LastEventID (at
// ThroughTS): a context pack shows Text and the messages after that one only.
//
// It is kept under its own key in the state bucket ("summary.<tenant>.<user>.<session>"),
// not inside State: ingest's compare-and-set of the state and the extractor's of
// the summary never race each other.
type Summary struct {
	Text string `json:"text,omitempty"`
	// FirstEventID and LastEventID are the first and the last message the summary
	// covers; Messages is how many it covers, Dropped how many of those the
	// emergency path dropped unsummarised.
	FirstEventID string    `json:"first_event_id"`
	LastEventID  string    `json:"last_event_id"`
	ThroughTS    time.Time `json:"through_ts"`
	Messages     int       `json:"messages"`
	Dropped      int       `json:"dropped,omitempty"`
	// By is who wrote the latest part: SummaryByLLM, SummaryByRules,
	// SummaryByRulesFallback or SummaryByEmergency.
	By        string    `json:"by"`
	UpdatedAt time.Time `json:"updated_at"`
	// DueID is the summary_due event the latest part was written for: its
	// redelivery writes nothing, not even on the emergency path, which would
	// otherwise drop another half.
	DueID string `json:"due_id,omitempty"`
}

// Covers reports whether m is one of the messages the summary stands for.
func (s Summary) Covers(m Message) bool {
	if s.LastEventID == "" {
		return false
	}
	if c := m.TS.Compare(s.ThroughTS); c != 0 {
		return c < 0
	}
	return m.EventID <= s.LastEventID
}

// After returns the messages of recent (oldest first) the summary does not cover.
func (s Summary) After(recent []Message) []Message {
	for i, m := range recent {
		if !s.Covers(m) {
			return recent[i:]
		}
	}
	return nil
}

// EstimateTokens is the token estimate of text used for session budgets: a
// token per four characters, rounded up.
func EstimateTokens(text string) int { return (utf8.RuneCountInString(text) + 3) / 4 }

func summaryKey(tenant, user, session string) (string, error) {
	key, err := events.SessionKey(tenant, user, session)
	if err != nil {
		return "", err
	}
	return "summary." + key, nil
}

// GetSummary returns a session's summary and its revision for PutSummary;
// ErrNotFound when it has none.
func (s *Store) GetSummary(ctx context.Context, tenant, user, session string) (Summary, uint64, error) {
	key, err := summaryKey(tenant, user, session)
	if err != nil {
		return Summary{}, 0, fmt.Errorf("session: get summary: %w", err)
	}
	e, err := s.state.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Summary{}, 0, fmt.Errorf("%w: summary %s", ErrNotFound, key)
	}
	if err != nil {
		return Summary{}, 0, fmt.Errorf("session: get summary %s: %w", key, err)
	}
	var sum Summary
	if err := json.Unmarshal(e.Value(), &sum); err != nil {
		return Summary{}, 0, fmt.Errorf("session: summary %s is corrupt: %w", key, err)
	}
	return sum, e.Revision(), nil
}

// PutSummary writes a session's summary if it is still at revision (0: it has
// none), and returns ErrSummaryChanged otherwise.
func (s *Store) PutSummary(ctx context.Context, tenant, user, session string, sum Summary, revision uint64) (uint64, error) {
	key, err := summaryKey(tenant, user, session)
	if err != nil {
		return 0, fmt.Errorf("session: put summary: %w", err)
	}
	data, err := json.Marshal(sum)
	if err != nil {
		return 0, err
	}
	rev, err := s.put(ctx, key, data, revision)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%w: %s", ErrSummaryChanged, key)
	}
	if err != nil {
		return 0, fmt.Errorf("session: put summary %s: %w", key, err)
	}
	return rev, nil
}

// put writes key if it is still at revision; revision 0 creates it, also over
// the marker a Delete left.
func (s *Store) put(ctx context.Context, key string, data []byte, revision uint64) (uint64, error) {
	if revision == 0 {
		return s.state.Create(ctx, key, data)
	}
	return s.state.Update(ctx, key, data, revision)
}

// deleteSummary purges a session's summary and its reflection claim.
func (s *Store) deleteSummary(ctx context.Context, tenant, user, session string) error {
	key, err := events.SessionKey(tenant, user, session)
	if err != nil {
		return err
	}
	for _, k := range []string{"summary." + key, "reflected." + key} {
		if err := s.state.Purge(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("session: delete %s: %w", k, err)
		}
	}
	return nil
}

// ClaimReflection records that the session's n-th policy reflection (SPEC B5)
// runs now, and reports false when it, or a later one, was claimed before: a
// redelivery never reflects twice. The claim is a compare-and-set on the key
// "reflected.<tenant>.<user>.<session>".
func (s *Store) ClaimReflection(ctx context.Context, tenant, user, session string, n int) (bool, error) {
	return s.moveReflection(ctx, tenant, user, session, func(last int) bool { return last < n }, n)
}

// ReleaseReflection gives back the claim of the session's n-th reflection,
// which failed, so that a redelivery runs it again; it does nothing once a
// later one was claimed.
func (s *Store) ReleaseReflection(ctx context.Context, tenant, user, session string, n int) error {
	_, err := s.moveReflection(ctx, tenant, user, session, func(last int) bool { return last == n }, n-1)
	return err
}

// moveReflection sets the session's reflection claim to n when its value
// passes ok (a missing key is 0), with a compare-and-set; it reports whether
// it did.
func (s *Store) moveReflection(ctx context.Context, tenant, user, session string, ok func(last int) bool, n int) (bool, error) {
	key, err := events.SessionKey(tenant, user, session)
	if err != nil {
		return false, fmt.Errorf("session: reflection claim: %w", err)
	}
	key = "reflected." + key
	var rev uint64
	last := 0
	e, err := s.state.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return false, fmt.Errorf("session: reflection claim %s: %w", key, err)
	default:
		last, _ = strconv.Atoi(string(e.Value()))
		rev = e.Revision()
	}
	if !ok(last) {
		return false, nil
	}
	_, err = s.put(ctx, key, []byte(strconv.Itoa(n)), rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil // another handler moved it
	}
	if err != nil {
		return false, fmt.Errorf("session: reflection claim %s: %w", key, err)
	}
	return true, nil
}
