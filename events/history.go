package events

import (
	"fmt"
	"time"
)

// Endpoints of the event history (SPEC D2): the AGENTMEM stream read back.
const (
	EndpointEventsList  = "events.list"
	EndpointEventsGet   = "events.get"
	EndpointEventsCount = "events.count"
)

// EventsQuery selects a tenant's events (endpoints events.list, events.count): all
// of them, one user's, or one session's, stored in [since, until) by the stream's
// clock (either may be left out). session_id needs user_id.
type EventsQuery struct {
	UserID    string    `json:"user_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	Until     time.Time `json:"until,omitzero"`
	Limit     int       `json:"limit,omitempty"`
	Offset    int       `json:"offset,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r EventsQuery) Validate() error {
	if r.UserID != "" {
		if err := ValidateID("user_id", r.UserID); err != nil {
			return wrap(ErrInvalidRequest, err)
		}
	}
	if r.SessionID != "" {
		if r.UserID == "" {
			return fmt.Errorf("%w: session_id needs user_id", ErrInvalidRequest)
		}
		if err := ValidateID("session_id", r.SessionID); err != nil {
			return wrap(ErrInvalidRequest, err)
		}
	}
	if !r.Since.IsZero() && !r.Until.IsZero() && !r.Until.After(r.Since) {
		return fmt.Errorf("%w: until must be after since", ErrInvalidRequest)
	}
	if err := limit("limit", r.Limit); err != nil {
		return wrap(ErrInvalidRequest, err)
	}
	return wrap(ErrInvalidRequest, nonNegative("offset", r.Offset))
}

// EventGetRequest names one event of the tenant by its id (endpoint events.get).
type EventGetRequest struct {
	ID string `json:"id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r EventGetRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("id", r.ID))
}

// StoredEvent is one event as the stream keeps it: its sequence, subject and the
// time the stream stored it, with the envelope.
type StoredEvent struct {
	Seq      uint64    `json:"seq"`
	Subject  string    `json:"subject"`
	StoredTS time.Time `json:"stored_ts"`
	Event    Envelope  `json:"event"`
}

// EventsListReply holds events in stream order. Truncated is set when the last
// events were dropped so that the reply fits in one NATS message; ask again with
// a larger offset for the rest.
type EventsListReply struct {
	Events    []StoredEvent `json:"events"`
	Truncated bool          `json:"truncated,omitempty"`
}

// EventsCountReply is how many events a query selects.
type EventsCountReply struct {
	Count int `json:"count"`
}
