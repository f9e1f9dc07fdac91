package session

import (
	"errors"
	"testing"
	"time"
)

// Each bound of a Config is the first value that works: one less is refused.
func TestConfigValidateBounds(t *testing.T) {
	least := Config{RecentMessages: 1, AppliedWindow: 1, CachedStates: 1, RecentSessions: 2}
	if err := least.Validate(); err != nil {
		t.Fatalf("the least config: %v", err)
	}
	for name, edit := range map[string]func(*Config){
		"RecentMessages": func(c *Config) { c.RecentMessages = 0 },
		"AppliedWindow":  func(c *Config) { c.AppliedWindow = 0 },
		"CachedStates":   func(c *Config) { c.CachedStates = 0 },
		"RecentSessions": func(c *Config) { c.RecentSessions = 1 },
	} {
		c := least
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s one under its bound: accepted", name)
		}
	}
}

// A summary trigger is refused only outside its ranges, whose ends are valid.
func TestSummaryTriggerValidateBounds(t *testing.T) {
	for _, c := range []struct {
		tr SummaryTrigger
		ok bool
	}{
		{SummaryTrigger{}, true},
		{SummaryTrigger{MessageThreshold: 0, KeepCount: 5, TokenPercent: 500}, true}, // off: nothing else matters
		{SummaryTrigger{MessageThreshold: 1}, true},
		{SummaryTrigger{MessageThreshold: 20, KeepCount: 19, TokenPercent: 100, ContextWindowTokens: 0}, true},
		{SummaryTrigger{MessageThreshold: -1}, false},
		{SummaryTrigger{MessageThreshold: 20, KeepCount: 20}, false},
		{SummaryTrigger{MessageThreshold: 20, KeepCount: -1}, false},
		{SummaryTrigger{MessageThreshold: 20, TokenPercent: 101}, false},
		{SummaryTrigger{MessageThreshold: 20, TokenPercent: -1}, false},
		{SummaryTrigger{MessageThreshold: 20, ContextWindowTokens: -1}, false},
	} {
		err := c.tr.Validate()
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrInvalidTrigger) {
			t.Errorf("%+v: %v, want valid=%v", c.tr, err, c.ok)
		}
	}
}

// The trigger fires once the messages pass the threshold or the tokens reach
// the share of the context window, whichever comes first.
func TestFired(t *testing.T) {
	tr := SummaryTrigger{MessageThreshold: 20, TokenPercent: 50, ContextWindowTokens: 1000}
	for _, c := range []struct {
		messages, tokens int
		want             bool
	}{{20, 499, false}, {21, 0, true}, {0, 500, true}, {20, 500, true}} {
		if got := tr.Fired(State{Messages: c.messages, Tokens: c.tokens}); got != c.want {
			t.Errorf("Fired(%d messages, %d tokens) = %v, want %v", c.messages, c.tokens, got, c.want)
		}
	}
}

// A summary covers the messages up to its last one: earlier by time, or at the
// same time with an id not after it; none when it names no last message.
func TestSummaryCovers(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	sum := Summary{LastEventID: "e5", ThroughTS: t0}
	for _, c := range []struct {
		m    Message
		want bool
	}{
		{Message{EventID: "e9", TS: t0.Add(-time.Second)}, true},
		{Message{EventID: "e1", TS: t0.Add(time.Second)}, false},
		{Message{EventID: "e4", TS: t0}, true},
		{Message{EventID: "e5", TS: t0}, true},
		{Message{EventID: "e6", TS: t0}, false},
	} {
		if got := sum.Covers(c.m); got != c.want {
			t.Errorf("Covers(%s at %v) = %v, want %v", c.m.EventID, c.m.TS.Sub(t0), got, c.want)
		}
	}
	if (Summary{ThroughTS: t0}).Covers(Message{EventID: "e1", TS: t0.Add(-time.Hour)}) {
		t.Error("a summary with no last message covers a message")
	}
}

// A token per four characters (runes, not bytes), rounded up.
func TestEstimateTokens(t *testing.T) {
	for text, want := range map[string]int{"": 0, "a": 1, "abcd": 1, "abcde": 2, "abcdefgh": 2, "éééé": 1, "ééééé": 2} {
		if got := EstimateTokens(text); got != want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", text, got, want)
		}
	}
}
