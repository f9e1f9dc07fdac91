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

// Admit applies the configured text limit, and DefaultMaxTextBytes when none is
// configured (Limits{}), and names the field and the limit it used.
func TestAdmitChecksTheTextSize(t *testing.T) {
	stored := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	admit := func(text string, lim Limits) error {
		env := New(TypeObservation, "acme", "u1", "", "s1")
		env.TS = stored
		env.Observation = &Observation{Role: RoleUser, Text: text}
		data, _ := json.Marshal(env)
		_, err := Admit("mem.acme.obs.u1.s1", data, stored, lim)
		return err
	}
	for _, tc := range []struct {
		size int
		lim  Limits
		want string // "" admits
	}{
		{10, Limits{MaxTextBytes: 10}, ""},
		{11, Limits{MaxTextBytes: 10}, "observation.text is 11 bytes, limit 10"},
		{DefaultMaxTextBytes, Limits{}, ""},
		{DefaultMaxTextBytes + 1, Limits{}, "observation.text is 65537 bytes, limit 65536"},
	} {
		err := admit(strings.Repeat("a", tc.size), tc.lim)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d bytes with %+v: %v, want admitted", tc.size, tc.lim, err)
		case tc.want != "" && (!errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d bytes with %+v: %v, want ErrTooLarge saying %q", tc.size, tc.lim, err, tc.want)
		}
	}
}

// An event admitted on the subject its type and ids belong on comes back as
// decoded; on another user's subject it is refused, naming both subjects; on a
// subject that is no event subject the subject is the reason, even when the
// payload is not JSON.
func TestAdmitChecksTheSubject(t *testing.T) {
	stored := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	env := New(TypeObservation, "acme", "u1", "", "s1")
	env.TS = stored
	env.Observation = &Observation{Role: RoleUser, Text: "hello"}
	data, _ := json.Marshal(env)

	got, err := Admit("mem.acme.obs.u1.s1", data, stored, Limits{})
	if err != nil || got.ID != env.ID || got.Observation == nil || got.Observation.Text != "hello" {
		t.Fatalf("Admit on its own subject = %+v, %v; want the event", got, err)
	}
	for _, tc := range []struct {
		subject string
		data    []byte
		want    []error
		says    string
	}{
		{"mem.acme.obs.u2.s1", data, []error{ErrInvalidEvent}, `received on "mem.acme.obs.u2.s1", but its type and ids belong on "mem.acme.obs.u1.s1"`},
		{"other.acme.obs.u1.s1", data, []error{ErrInvalidEvent, ErrInvalidSubject}, `"other.acme.obs.u1.s1"`},
		{"other.acme.obs.u1.s1", []byte("not json"), []error{ErrInvalidEvent, ErrInvalidSubject}, `"other.acme.obs.u1.s1"`},
	} {
		got, err := Admit(tc.subject, tc.data, stored, Limits{})
		for _, want := range tc.want {
			if !errors.Is(err, want) {
				t.Errorf("Admit on %s: %v, want %v", tc.subject, err, want)
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.says) || got.ID != "" {
			t.Errorf("Admit on %s = %+v, %v; want no event and an error saying %s", tc.subject, got, err, tc.says)
		}
	}
}
