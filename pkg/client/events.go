package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/redact"
)

// Publish validates env and publishes it on the subject of its type and IDs, with
// Nats-Msg-Id = env.ID, and waits for the stream's acknowledgement. Publishing the
// same envelope again (a retry after a lost ack) stores it once, as long as the
// retry comes within the stream's duplicate window; workers dedupe by ID beyond it.
// env.Tenant must be the client's tenant. Unless Config.KeepSecrets is set, an
// observation is published with its credentials redacted (redactObservation).
func (c *Client) Publish(ctx context.Context, env events.Envelope) error {
	if env.Tenant != c.cfg.Tenant {
		return fmt.Errorf("%w: tenant is %q but this client speaks for %q", ErrInvalidEvent, env.Tenant, c.cfg.Tenant)
	}
	if env.Observation != nil && !c.cfg.KeepSecrets {
		env.Observation = redactObservation(*env.Observation)
	}
	subject, data, err := env.Encode()
	if err == nil {
		// The workers dead-letter an event over the limit; refuse it here instead, so
		// the caller learns it before an id is handed out.
		err = env.CheckSize(c.cfg.MaxTextBytes)
	}
	if err != nil {
		return &eventError{err}
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(events.HeaderMsgID, env.ID)
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ctx, stop := c.refusals.watch(ctx, subject)
	defer stop()
	_, err = c.js.PublishMsg(ctx, msg)
	if refusal := refusedCause(ctx); refusal != nil {
		return fmt.Errorf("%w: event %s on %s: %w", ErrPublish, env.ID, subject, refusal)
	}
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w captures %s (is agentmem running and the event stream provisioned?): %w", ErrNoStream, subject, err)
	case err != nil:
		return fmt.Errorf("%w: event %s on %s: %w", ErrPublish, env.ID, subject, err)
	}
	return nil
}

// eventError is an event the contract rejects: it matches ErrInvalidEvent and
// the events error it carries, whose text already says "invalid event".
type eventError struct{ err error }

func (e *eventError) Error() string   { return "client: " + e.err.Error() }
func (e *eventError) Unwrap() []error { return []error{ErrInvalidEvent, e.err} }

// redactObservation returns a copy of o with the credentials in its text, its
// tool call's arguments and its tool result's output replaced by markers
// (redact.Text); the caller's observation is left as it is. Arguments that a
// marker would leave invalid JSON go as a JSON string of the redacted text.
func redactObservation(o events.Observation) *events.Observation {
	o.Text, _ = redact.Text(o.Text)
	if o.ToolCall != nil {
		call := *o.ToolCall
		if args, found := redact.Text(string(call.Arguments)); found {
			call.Arguments = json.RawMessage(args)
			if !json.Valid(call.Arguments) {
				call.Arguments, _ = json.Marshal(args)
			}
		}
		o.ToolCall = &call
	}
	if o.ToolResult != nil {
		res := *o.ToolResult
		res.Output, _ = redact.Text(res.Output)
		o.ToolResult = &res
	}
	return &o
}

// Observe publishes one observation of a session and returns the event's id.
func (c *Client) Observe(ctx context.Context, userID, sessionID string, obs events.Observation) (string, error) {
	env := events.New(events.TypeObservation, c.cfg.Tenant, userID, c.cfg.AgentID, sessionID)
	env.Observation = &obs
	if err := c.Publish(ctx, env); err != nil {
		return "", err
	}
	return env.ID, nil
}

// Say publishes a message (observation kind message); meta travels unchanged into
// the provenance of every memory built from it.
func (c *Client) Say(ctx context.Context, userID, sessionID string, role events.Role, text string, meta map[string]any) (string, error) {
	return c.Observe(ctx, userID, sessionID, events.Observation{Kind: events.KindMessage, Role: role, Text: text, Meta: meta})
}

// ToolCall publishes a tool call the model made (role assistant).
func (c *Client) ToolCall(ctx context.Context, userID, sessionID string, call events.ToolCall) (string, error) {
	return c.Observe(ctx, userID, sessionID, events.Observation{Kind: events.KindToolCall, Role: events.RoleAssistant, ToolCall: &call})
}

// ToolResult publishes what a tool returned (role tool).
func (c *Client) ToolResult(ctx context.Context, userID, sessionID string, result events.ToolResult) (string, error) {
	return c.Observe(ctx, userID, sessionID, events.Observation{Kind: events.KindToolResult, Role: events.RoleTool, ToolResult: &result})
}

// Turn is a turn StartTurn opened. Fill in Plan, ToolCalls, ToolResults or
// FinalOutputObsID before FinishTurn; they are merged into the stored turn.
type Turn struct {
	events.TurnRecord
	UserID    string
	SessionID string
	// EventID is the id of the turn_started event.
	EventID string
}

// StartTurn publishes turn_started for a new running turn. An empty turnID gets a
// fresh ULID; inputEventID (optional) is the observation the turn answers.
func (c *Client) StartTurn(ctx context.Context, userID, sessionID, turnID, inputEventID string) (Turn, error) {
	if turnID == "" {
		turnID = ulid.Make().String()
	}
	rec := events.TurnRecord{
		TurnID:       turnID,
		InputEventID: inputEventID,
		Status:       events.TurnRunning,
		StartedTS:    time.Now().UTC(),
	}
	id, err := c.Observe(ctx, userID, sessionID, events.Observation{Kind: events.KindTurnStarted, Role: events.RoleAssistant, Turn: &rec})
	if err != nil {
		return Turn{}, err
	}
	return Turn{TurnRecord: rec, UserID: userID, SessionID: sessionID, EventID: id}, nil
}

// FinishTurn publishes turn_finished for t with status ok, error or timeout and,
// for a failed turn, the error text. It returns the event's id.
func (c *Client) FinishTurn(ctx context.Context, t Turn, status events.TurnStatus, errText string) (string, error) {
	rec := t.TurnRecord
	rec.Status = status
	rec.Error = errText
	// A clock that stepped back must not make the event invalid (finished before started).
	rec.FinishedTS = time.Now().UTC()
	if rec.FinishedTS.Before(rec.StartedTS) {
		rec.FinishedTS = rec.StartedTS
	}
	return c.Observe(ctx, t.UserID, t.SessionID, events.Observation{Kind: events.KindTurnFinished, Role: events.RoleAssistant, Turn: &rec})
}

// EndSession publishes session_ended, which lets the extractor turn the session
// into Markdown memory (SPEC A3). It returns the event's id.
func (c *Client) EndSession(ctx context.Context, userID, sessionID string) (string, error) {
	env := events.New(events.TypeSessionEnded, c.cfg.Tenant, userID, c.cfg.AgentID, sessionID)
	if err := c.Publish(ctx, env); err != nil {
		return "", err
	}
	return env.ID, nil
}
