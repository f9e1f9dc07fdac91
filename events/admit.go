package events

import (
	"errors"
	"fmt"
	"time"
)

// DefaultMaxClockSkew is the default of Limits.MaxClockSkew (limits.max_clock_skew):
// an event may say it happened up to a day after the stream stored it.
const DefaultMaxClockSkew = 24 * time.Hour

// ErrClockSkew: an event's ts lies outside the window a reader accepts (before
// 1970, or more than Limits.MaxClockSkew after the stream stored it). It is
// wrapped with ErrInvalidEvent.
var ErrClockSkew = errors.New("ts outside the accepted window")

// Limits are the configured bounds every reader of the stream applies to an
// event, next to the contract's fixed rules.
type Limits struct {
	// MaxTextBytes bounds each text of the event (Envelope.CheckSize); 0 is
	// DefaultMaxTextBytes.
	MaxTextBytes int
	// MaxClockSkew is how far after the stream stored an event its ts may be; 0
	// is DefaultMaxClockSkew.
	MaxClockSkew time.Duration
}

// ErrInvalidLimits: a Limits field is negative.
var ErrInvalidLimits = errors.New("invalid limits")

// Validate reports a negative limit.
func (l Limits) Validate() error {
	if l.MaxTextBytes < 0 || l.MaxClockSkew < 0 {
		return fmt.Errorf("%w: MaxTextBytes %d and MaxClockSkew %s must not be negative", ErrInvalidLimits, l.MaxTextBytes, l.MaxClockSkew)
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	if l.MaxTextBytes == 0 {
		l.MaxTextBytes = DefaultMaxTextBytes
	}
	if l.MaxClockSkew == 0 {
		l.MaxClockSkew = DefaultMaxClockSkew
	}
	return l
}

// Admit is the one decision of what an event read from the stream is, shared by
// every reader (the workers' pipeline, the extractor's and the retriever's
// session reads, replay, rebuild, export): data must decode (Decode), belong on
// the subject it was stored on (CheckSubject), keep its texts within
// lim.MaxTextBytes (CheckSize) and its ts within the clock window (CheckTime,
// against storedAt, the stream's time for the message, so that a later reader
// decides as ingest did). A subject that is no event subject is the reason
// whatever the payload: nothing of such a message names a user. Whether its id
// is its own (a reused id with other content) is the event store's part
// (eventstore's claims), since it needs what came before.
func Admit(subject string, data []byte, storedAt time.Time, lim Limits) (Envelope, error) {
	lim = lim.withDefaults()
	env, err := Decode(data)
	if err == nil {
		err = env.CheckSubject(subject)
	}
	if err == nil {
		err = env.CheckSize(lim.MaxTextBytes)
	}
	if err == nil {
		err = env.CheckTime(storedAt, lim.MaxClockSkew)
	}
	if err != nil {
		if _, serr := ParseSubject(subject); serr != nil {
			err = fmt.Errorf("%w: %w", ErrInvalidEvent, serr)
		}
		return Envelope{}, err
	}
	return env, nil
}

// CheckTime reports a ts before 1970 or more than maxSkew after storedAt (the
// stream's time for the message); the error wraps ErrInvalidEvent and
// ErrClockSkew. A zero storedAt checks only the lower bound.
func (e Envelope) CheckTime(storedAt time.Time, maxSkew time.Duration) error {
	if e.TS.Before(time.Unix(0, 0)) {
		return fmt.Errorf("%w: %w: ts %s is before 1970-01-01", ErrInvalidEvent, ErrClockSkew, e.TS.Format(time.RFC3339))
	}
	if !storedAt.IsZero() && e.TS.Sub(storedAt) > maxSkew {
		return fmt.Errorf("%w: %w: ts %s is %s after the stream stored the event (%s); limits.max_clock_skew is %s",
			ErrInvalidEvent, ErrClockSkew, e.TS.Format(time.RFC3339), e.TS.Sub(storedAt).Round(time.Second), storedAt.UTC().Format(time.RFC3339), maxSkew)
	}
	return nil
}
