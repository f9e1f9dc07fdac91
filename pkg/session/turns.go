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

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/kvcas"
)

func turnKey(sessionKey, turnID string) (string, error) {
	if _, _, _, err := events.ParseSessionKey(sessionKey); err != nil {
		return "", fmt.Errorf("session: turn: %w", err)
	}
	if err := events.ValidateID("turn_id", turnID); err != nil {
		return "", fmt.Errorf("session: turn: %w", err)
	}
	return sessionKey + "." + turnID, nil
}

// SaveTurn stores a turn, replacing any turn with the same id.
func (s *Store) SaveTurn(ctx context.Context, t events.TurnRecord) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("session: save turn: %w", err)
	}
	key, err := turnKey(t.SessionKey, t.TurnID)
	if err != nil {
		return err
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("session: save turn %s: %w", key, err)
	}
	if _, err := s.turns.Put(ctx, key, data); err != nil {
		return fmt.Errorf("session: save turn %s: %w", key, err)
	}
	return nil
}

// mergeTurn folds a turn_started or turn_finished record into the stored turn: fields
// set in t win, tool calls and results accumulate without repeats.
func (s *Store) mergeTurn(ctx context.Context, t events.TurnRecord) error {
	key, err := turnKey(t.SessionKey, t.TurnID)
	if err != nil {
		return err
	}
	_, err = kvcas.UpdateKV(ctx, s.turns, key, 0, func(old []byte, exists bool) ([]byte, error) {
		merged := t
		if exists {
			var cur events.TurnRecord
			if err := json.Unmarshal(old, &cur); err != nil {
				return nil, fmt.Errorf("session: turn %s is corrupt: %w", key, err)
			}
			merged = mergeTurnRecords(cur, t)
		}
		if merged.Status == "" {
			merged.Status = events.TurnRunning
		}
		if err := merged.Validate(); err != nil {
			return nil, fmt.Errorf("session: turn %s: %w", key, err)
		}
		return json.Marshal(merged)
	})
	if err != nil {
		return fmt.Errorf("session: merge turn %s: %w", key, err)
	}
	return nil
}

func mergeTurnRecords(cur, upd events.TurnRecord) events.TurnRecord {
	out := cur
	setIf := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setIf(&out.InputEventID, upd.InputEventID)
	setIf(&out.Plan, upd.Plan)
	setIf(&out.FinalOutputObsID, upd.FinalOutputObsID)
	setIf(&out.Error, upd.Error)
	if upd.Status != "" {
		out.Status = upd.Status
	}
	if out.StartedTS.IsZero() || (!upd.StartedTS.IsZero() && upd.StartedTS.Before(out.StartedTS)) {
		out.StartedTS = upd.StartedTS
	}
	if !upd.FinishedTS.IsZero() {
		out.FinishedTS = upd.FinishedTS
	}
	for _, c := range upd.ToolCalls {
		if !slices.ContainsFunc(out.ToolCalls, func(x events.ToolCall) bool { return x.ID == c.ID && x.Name == c.Name }) {
			out.ToolCalls = append(out.ToolCalls, c)
		}
	}
	for _, r := range upd.ToolResults {
		if !slices.ContainsFunc(out.ToolResults, func(x events.ToolResult) bool { return x.CallID == r.CallID && x.Output == r.Output }) {
			out.ToolResults = append(out.ToolResults, r)
		}
	}
	if len(upd.Meta) > 0 {
		meta := make(map[string]any, len(out.Meta)+len(upd.Meta))
		for k, v := range out.Meta {
			meta[k] = v
		}
		for k, v := range upd.Meta {
			meta[k] = v
		}
		out.Meta = meta
	}
	return out
}

// GetTurn returns one turn.
func (s *Store) GetTurn(ctx context.Context, sessionKey, turnID string) (events.TurnRecord, error) {
	key, err := turnKey(sessionKey, turnID)
	if err != nil {
		return events.TurnRecord{}, err
	}
	e, err := s.turns.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return events.TurnRecord{}, fmt.Errorf("%w: turn %s", ErrNotFound, key)
	}
	if err != nil {
		return events.TurnRecord{}, fmt.Errorf("session: get turn %s: %w", key, err)
	}
	var t events.TurnRecord
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return events.TurnRecord{}, fmt.Errorf("session: turn %s is corrupt: %w", key, err)
	}
	return t, nil
}

// ListTurns returns the session's turns ordered by start time (then id).
func (s *Store) ListTurns(ctx context.Context, sessionKey string) ([]events.TurnRecord, error) {
	keys, err := s.turnKeys(ctx, sessionKey)
	if err != nil {
		return nil, err
	}
	turns := make([]events.TurnRecord, 0, len(keys))
	for _, k := range keys {
		t, err := s.GetTurn(ctx, sessionKey, strings.TrimPrefix(k, sessionKey+"."))
		if errors.Is(err, ErrNotFound) {
			continue // deleted between listing and reading
		}
		if err != nil {
			return nil, err
		}
		turns = append(turns, t)
	}
	slices.SortFunc(turns, func(a, b events.TurnRecord) int {
		if c := a.StartedTS.Compare(b.StartedTS); c != 0 {
			return c
		}
		return strings.Compare(a.TurnID, b.TurnID)
	})
	return turns, nil
}

// UpdateTurnStatus sets a turn's status (and error text); a status other than running
// also stamps finished_ts.
func (s *Store) UpdateTurnStatus(ctx context.Context, sessionKey, turnID string, status events.TurnStatus, errText string, at time.Time) error {
	if _, err := s.GetTurn(ctx, sessionKey, turnID); err != nil {
		return err
	}
	upd := events.TurnRecord{TurnID: turnID, SessionKey: sessionKey, Status: status, Error: errText}
	if status != events.TurnRunning {
		upd.FinishedTS = at
	}
	return s.mergeTurn(ctx, upd)
}

// CountTurns returns how many turns the session has.
func (s *Store) CountTurns(ctx context.Context, sessionKey string) (int, error) {
	keys, err := s.turnKeys(ctx, sessionKey)
	return len(keys), err
}

// DeleteTurns removes the session's turns and returns how many there were.
func (s *Store) DeleteTurns(ctx context.Context, sessionKey string) (int, error) {
	keys, err := s.turnKeys(ctx, sessionKey)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := s.turns.Purge(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, fmt.Errorf("session: delete turn %s: %w", k, err)
		}
	}
	return len(keys), nil
}

func (s *Store) turnKeys(ctx context.Context, sessionKey string) ([]string, error) {
	if _, _, _, err := events.ParseSessionKey(sessionKey); err != nil {
		return nil, fmt.Errorf("session: turns: %w", err)
	}
	keys, err := listKeys(ctx, s.turns, sessionKey+".*")
	slices.Sort(keys)
	return keys, err
}
