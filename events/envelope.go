package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// SchemaVersion is the envelope version this build writes and the newest it reads.
const SchemaVersion = 1

// Type names the kind of event, and so which body an envelope carries.
type Type string

// Event types.
const (
	TypeObservation          Type = "observation"
	TypeSessionEnded         Type = "session_ended"
	TypeMemoryHit            Type = "memory_hit"
	TypeMemoryWritten        Type = "memory_written"
	TypeConsolidateRequested Type = "consolidate_requested"
	// TypeSummaryDue says a session has grown past its summary threshold (SPEC
	// B2); ingest publishes it, the extractor summarises.
	TypeSummaryDue Type = "summary_due"
	// TypeWrite records a request to the retriever that changes memory (append,
	// add, items, policy, ...): the stream holds every write, so a replay or a
	// rebuild applies it again (pkg/writes).
	TypeWrite Type = "write"
)

// Types lists every event type.
var Types = []Type{TypeObservation, TypeSessionEnded, TypeMemoryHit, TypeMemoryWritten, TypeConsolidateRequested, TypeSummaryDue, TypeWrite}

// HeaderMsgID is the NATS header that carries Envelope.ID on publish, so JetStream
// drops a duplicate publish of the same event inside its duplicate window.
const HeaderMsgID = "Nats-Msg-Id"

// Envelope is one event on the wire. Exactly the body named by Type is set (the
// session_ended and consolidate_requested bodies may also be left out).
type Envelope struct {
	ID            string    `json:"id"` // ULID from New; any valid ID is accepted
	Type          Type      `json:"type"`
	SchemaVersion int       `json:"schema_version"`
	TS            time.Time `json:"ts"`
	Tenant        string    `json:"tenant"`
	UserID        string    `json:"user_id"`
	AgentID       string    `json:"agent_id,omitempty"`
	SessionID     string    `json:"session_id,omitempty"`

	Observation          *Observation          `json:"observation,omitempty"`
	SessionEnded         *SessionEnded         `json:"session_ended,omitempty"`
	MemoryHit            *MemoryHit            `json:"memory_hit,omitempty"`
	MemoryWritten        *MemoryWritten        `json:"memory_written,omitempty"`
	ConsolidateRequested *ConsolidateRequested `json:"consolidate_requested,omitempty"`
	SummaryDue           *SummaryDue           `json:"summary_due,omitempty"`
	Write                *Write                `json:"write,omitempty"`
}

// New returns an envelope of type t with a fresh ULID, the current UTC time and the
// current schema version; the caller sets the body.
func New(t Type, tenant, userID, agentID, sessionID string) Envelope {
	return Envelope{
		ID:            ulid.Make().String(),
		Type:          t,
		SchemaVersion: SchemaVersion,
		TS:            time.Now().UTC(),
		Tenant:        tenant,
		UserID:        userID,
		AgentID:       agentID,
		SessionID:     sessionID,
	}
}

// Validate checks the envelope against the contract. The error wraps ErrInvalidEvent
// (and ErrInvalidID for a bad ID) and names the field and the rule it breaks.
func (e Envelope) Validate() error {
	return wrap(ErrInvalidEvent, e.validate())
}

func (e Envelope) validate() error {
	if e.SchemaVersion != SchemaVersion {
		return ruleError("schema_version", "is %d; this build knows only %d", e.SchemaVersion, SchemaVersion)
	}
	if err := validateIDs("id", e.ID, "tenant", e.Tenant, "user_id", e.UserID); err != nil {
		return err
	}
	if err := optionalID("agent_id", e.AgentID); err != nil {
		return err
	}
	if e.TS.IsZero() {
		return ruleError("ts", "is missing (zero time)")
	}
	if !oneOf(e.Type, Types) {
		return enumError("type", e.Type, Types)
	}
	if e.Type == TypeObservation || e.Type == TypeSessionEnded || e.Type == TypeSummaryDue {
		if err := ValidateID("session_id", e.SessionID); err != nil {
			return fmt.Errorf("%w (required for type %s)", err, e.Type)
		}
		// A session is a user's: an owner id of the agent or tenant scope
		// there would let a conversation write into a shared scope.
		if err := notReserved("user_id", e.UserID); err != nil {
			return err
		}
	} else if err := optionalID("session_id", e.SessionID); err != nil {
		return err
	}
	if err := e.checkBodies(); err != nil {
		return err
	}
	switch e.Type {
	case TypeObservation:
		return e.Observation.validate("observation", e.sessionKey())
	case TypeMemoryHit:
		return e.MemoryHit.validate("memory_hit")
	case TypeMemoryWritten:
		return e.MemoryWritten.validate("memory_written")
	case TypeSummaryDue:
		return e.SummaryDue.validate("summary_due")
	case TypeWrite:
		return e.Write.validate("write", e.UserID)
	}
	return nil
}

// checkBodies enforces "exactly the body that matches the type".
func (e Envelope) checkBodies() error {
	bodies := []struct {
		t       Type
		set     bool
		require bool
	}{
		{TypeObservation, e.Observation != nil, true},
		{TypeSessionEnded, e.SessionEnded != nil, false},
		{TypeMemoryHit, e.MemoryHit != nil, true},
		{TypeMemoryWritten, e.MemoryWritten != nil, true},
		{TypeConsolidateRequested, e.ConsolidateRequested != nil, false},
		{TypeSummaryDue, e.SummaryDue != nil, true},
		{TypeWrite, e.Write != nil, true},
	}
	for _, b := range bodies {
		switch {
		case b.t == e.Type && b.require && !b.set:
			return ruleError(string(b.t), "is required for type %s", e.Type)
		case b.t != e.Type && b.set:
			return ruleError(string(b.t), "must not be set on an event of type %s", e.Type)
		}
	}
	return nil
}

// sessionKey is the envelope's session key, or "" when it has no session.
func (e Envelope) sessionKey() string {
	if e.SessionID == "" {
		return ""
	}
	return e.Tenant + "." + e.UserID + "." + e.SessionID
}

// Subject is the subject the envelope is published on, built from its type and IDs.
func (e Envelope) Subject() (string, error) {
	switch e.Type {
	case TypeObservation:
		return ObservationSubject(e.Tenant, e.UserID, e.SessionID)
	case TypeSessionEnded:
		return EndedSubject(e.Tenant, e.UserID, e.SessionID)
	case TypeMemoryHit:
		return HitSubject(e.Tenant, e.UserID)
	case TypeMemoryWritten:
		return WrittenSubject(e.Tenant, e.UserID)
	case TypeConsolidateRequested:
		return ConsolidateSubject(e.Tenant, e.UserID)
	case TypeSummaryDue:
		return SummaryDueSubject(e.Tenant, e.UserID, e.SessionID)
	case TypeWrite:
		return WriteSubject(e.Tenant, e.UserID)
	default:
		return "", wrap(ErrInvalidSubject, enumError("type", e.Type, Types))
	}
}

// Encode is what goes on the wire for e: e validated, its subject and its JSON.
func (e Envelope) Encode() (subject string, data []byte, err error) {
	if err := e.Validate(); err != nil {
		return "", nil, err
	}
	if subject, err = e.Subject(); err != nil {
		return "", nil, err
	}
	if data, err = json.Marshal(e); err != nil {
		return "", nil, fmt.Errorf("event %s: encode: %w", e.ID, err)
	}
	return subject, data, nil
}

// CheckSubject verifies that an envelope received on subject belongs there, so a
// producer cannot file an event under another tenant, user or session by lying in
// either the subject or the body.
func (e Envelope) CheckSubject(subject string) error {
	want, err := e.Subject()
	if err != nil {
		return wrap(ErrInvalidEvent, err)
	}
	if subject != want {
		return fmt.Errorf("%w: received on %q, but its type and ids belong on %q", ErrInvalidEvent, subject, want)
	}
	return nil
}

// Decode parses and validates one envelope. It checks schema_version before
// anything else, so an event from a newer producer fails with ErrUnknownSchemaVersion
// rather than with whatever its new shape would break. Other JSON errors wrap
// ErrMalformed and contract violations wrap ErrInvalidEvent. Unknown fields are
// accepted. Numbers inside observation meta are kept as json.Number, exactly as sent.
//
// Every worker decodes every message, so a valid envelope is parsed once; only a
// failed parse reads the input again, to report the error in the order above.
func Decode(data []byte) (Envelope, error) {
	// The outer SchemaVersion shadows the envelope's (encoding/json prefers the
	// shallower field), so any version decodes and is checked before it is trusted.
	var w struct {
		Envelope
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	dec := numberDecoder(data)
	err := dec.Decode(&w)
	if err == nil && len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		err = errTrailingData
	}
	if err != nil {
		return Envelope{}, decodeError(data, err)
	}
	if err := checkSchemaVersion(w.SchemaVersion); err != nil {
		return Envelope{}, err
	}
	e := w.Envelope
	e.SchemaVersion = SchemaVersion
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// errTrailingData marks input with more than one JSON value; decodeError replaces
// it with json.Unmarshal's own syntax error.
var errTrailingData = errors.New("data after the top-level value")

// decodeError classifies an input that did not decode, as the contract orders it:
// invalid JSON anywhere (json.Unmarshal checks the whole input before decoding)
// is ErrMalformed, then an unknown schema_version wins over the shape's errors.
// Those are reported by decoding into Envelope itself, so that they name its
// fields as they always have; decodeErr is the fallback.
func decodeError(data []byte, decodeErr error) error {
	var probe struct {
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := checkSchemaVersion(probe.SchemaVersion); err != nil {
		return err
	}
	var e Envelope
	if err := numberDecoder(data).Decode(&e); err != nil {
		decodeErr = err
	}
	return fmt.Errorf("%w: %w", ErrMalformed, decodeErr)
}

// numberDecoder decodes data keeping numbers as json.Number (observation meta
// is passed on exactly as sent).
func numberDecoder(data []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec
}

// checkSchemaVersion accepts exactly the integer SchemaVersion.
func checkSchemaVersion(raw json.RawMessage) error {
	v := strings.TrimSpace(string(raw))
	switch v {
	case "", "null":
		return fmt.Errorf("%w: schema_version is missing; this build reads version %d", ErrUnknownSchemaVersion, SchemaVersion)
	case fmt.Sprint(SchemaVersion):
		return nil
	case strconv.Quote(fmt.Sprint(SchemaVersion)):
		// "1" reads as the right version but is a JSON string: say what differs.
		return fmt.Errorf("%w: schema_version is the string %s; this build reads the number %d", ErrUnknownSchemaVersion, v, SchemaVersion)
	default:
		return fmt.Errorf("%w: schema_version is %s; this build reads version %d", ErrUnknownSchemaVersion, v, SchemaVersion)
	}
}

// Record is the D1 EventRecord view of an observation or session_ended envelope.
func (e Envelope) Record() (EventRecord, error) {
	if e.Type != TypeObservation && e.Type != TypeSessionEnded {
		return EventRecord{}, wrap(ErrInvalidEvent, ruleError("type", "is %s; only observation and session_ended events belong to a session record", e.Type))
	}
	if err := e.Validate(); err != nil {
		return EventRecord{}, err
	}
	return EventRecord{
		EventID:       e.ID,
		Type:          e.Type,
		TS:            e.TS,
		SessionKey:    e.sessionKey(),
		AgentID:       e.AgentID,
		Obs:           e.Observation,
		SchemaVersion: e.SchemaVersion,
	}, nil
}
