package session

import (
	"errors"
	"fmt"
)

// ErrInvalidTrigger reports a SummaryTrigger that cannot work.
var ErrInvalidTrigger = errors.New("session: invalid summary trigger")

// SummaryTrigger says when a session's summary is due (SPEC B2): its messages
// pass MessageThreshold, or their estimated tokens pass TokenPercent of
// ContextWindowTokens. MessageThreshold 0 turns the trigger off.
type SummaryTrigger struct {
	MessageThreshold    int
	TokenPercent        int
	ContextWindowTokens int
	// KeepCount is how many messages a summary leaves verbatim; after the first
	// crossing a summary is due again when the unsummarised ones pass the
	// threshold again, every MessageThreshold + 1 - KeepCount messages.
	KeepCount int
}

// Validate reports a trigger that cannot work.
func (t SummaryTrigger) Validate() error {
	if t.MessageThreshold == 0 {
		return nil
	}
	if t.MessageThreshold < 1 || t.KeepCount < 0 || t.KeepCount >= t.MessageThreshold {
		return fmt.Errorf("%w: summary trigger: KeepCount %d must be in [0, MessageThreshold %d)", ErrInvalidTrigger, t.KeepCount, t.MessageThreshold)
	}
	if t.TokenPercent < 0 || t.TokenPercent > 100 || t.ContextWindowTokens < 0 {
		return fmt.Errorf("%w: summary trigger: TokenPercent %d must be in [0, 100] and ContextWindowTokens %d not negative", ErrInvalidTrigger, t.TokenPercent, t.ContextWindowTokens)
	}
	return nil
}

// MessageCrossing is how many times a session of n messages has passed the
// message threshold: 0 up to the threshold, 1 just past it, then one more each
// time the messages since a summary (KeepCount left by it) pass it again, every
// MessageThreshold + 1 - KeepCount messages.
func (t SummaryTrigger) MessageCrossing(n int) int {
	if t.MessageThreshold == 0 || n <= t.MessageThreshold {
		return 0
	}
	return 1 + (n-t.MessageThreshold-1)/(t.MessageThreshold+1-t.KeepCount)
}

// TokenCrossing is how many times a session of n estimated tokens has passed
// TokenPercent of the context window: once per such share.
func (t SummaryTrigger) TokenCrossing(n int) int {
	limit := t.ContextWindowTokens * t.TokenPercent / 100
	if t.MessageThreshold == 0 || limit < 1 {
		return 0
	}
	return n / limit
}

// Fired reports whether the trigger has fired for st at least once: only then
// can the session have a summary (the retriever reads it only then).
func (t SummaryTrigger) Fired(st State) bool {
	return t.MessageCrossing(st.Messages) > 0 || t.TokenCrossing(st.Tokens) > 0
}
