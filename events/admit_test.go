package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Issue 30.7: ts must lie between 1970 and limits.max_clock_skew after the
// stream stored the event; outside, Admit names ts and the limit.
func TestAdmitChecksTheClockWindow(t *testing.T) {
	stored := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	lim := Limits{MaxClockSkew: time.Hour}
	for _, tc := range []struct {
		ts   time.Time
		want string // "" admits
	}{
		{stored.Add(-365 * 24 * time.Hour), ""},
		{stored.Add(time.Hour), ""},
		{stored.Add(time.Hour + time.Second), "ts 2026-11-28T10:00:01Z is 1h0m1s after the stream stored the event (2026-11-28T09:00:00Z); limits.max_clock_skew is 1h0m0s"},
		{time.Unix(0, 0).UTC(), ""},
		{time.Unix(-1, 0).UTC(), "ts 1969-12-31T23:59:59Z is before 1970-01-01"},
	} {
		env := New(TypeObservation, "acme", "u1", "", "s1")
		env.TS = tc.ts
		env.Observation = &Observation{Role: RoleUser, Text: "hello"}
		data, _ := json.Marshal(env)
		_, err := Admit("mem.acme.obs.u1.s1", data, stored, lim)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ts %s: %v, want admitted", tc.ts, err)
		case tc.want != "" && (!errors.Is(err, ErrClockSkew) || !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ts %s: %v, want ErrClockSkew naming %q", tc.ts, err, tc.want)
		}
	}
}
