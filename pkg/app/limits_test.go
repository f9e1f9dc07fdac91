package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
)

// Issue 21 through the whole stack: an observation over limits.max_text_bytes, one
// whose text is only white space, and events on subjects with too few or too many
// tokens (or an unknown kind) are each dead-lettered once, by ingest, with a
// reason in the documented form; the extractor leaves the oversize observation out
// of the session's memory.
func TestOversizeBlankAndMisroutedEventsAreDeadLetteredOnce(t *testing.T) {
	r := upStack(t)
	ctx := context.Background()
	js := r.stack.Runtime().JS
	publish := func(subject string, env events.Envelope) { r.publishOn(t, subject, env) }
	say := func(text string) events.Envelope {
		env := events.New(events.TypeObservation, "acme", "u1", "bot", "s1")
		env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
		return env
	}
	huge := "Remember: I prefer " + strings.Repeat("bar charts ", 700000/11)
	publish("mem.acme.obs.u1.s1", say(huge))
	publish("mem.acme.obs.u1.s1", say(" \n\t "))
	misrouted := []string{"mem.acme.obs.u1", "mem.acme.obs.u1.s1.extra", "mem.acme.ended.u1", "mem.acme.gossip.u1"}
	for _, subject := range misrouted {
		publish(subject, say("Remember: I prefer line charts."))
	}
	r.say(t, "u1", "s1", events.RoleUser, "Remember: I prefer dark themes.")
	if _, err := r.client.EndSession(ctx, "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	r.waitIdle(t)

	dls, err := bus.ListDeadLetters(ctx, js, bus.DefaultDLQStream, 20)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // reason by subject; the observation subject has two
		"mem.acme.obs.u1":          `invalid event: invalid subject: "mem.acme.obs.u1" has 4 tokens; obs subjects have 5`,
		"mem.acme.obs.u1.s1.extra": `invalid event: invalid subject: "mem.acme.obs.u1.s1.extra" has 6 tokens; obs subjects have 5`,
		"mem.acme.ended.u1":        `invalid event: invalid subject: "mem.acme.ended.u1" has 4 tokens; ended subjects have 5`,
		"mem.acme.gossip.u1":       `invalid event: invalid subject: "mem.acme.gossip.u1" has event kind "gossip"`,
	}
	var obsReasons []string
	for _, dl := range dls {
		if dl.Worker != bus.WorkerIngest || dl.Class != bus.ClassMalformed {
			t.Errorf("dead letter %s by %s, class %s: %s", dl.Subject, dl.Worker, dl.Class, dl.Reason)
		}
		if dl.Subject == "mem.acme.obs.u1.s1" {
			obsReasons = append(obsReasons, dl.Reason)
			continue
		}
		prefix, ok := want[dl.Subject]
		if !ok || !strings.HasPrefix(dl.Reason, prefix) {
			t.Errorf("dead letter on %s: reason %q, want it to start with %q", dl.Subject, dl.Reason, prefix)
		}
		delete(want, dl.Subject)
	}
	if len(want) != 0 || len(dls) != len(misrouted)+2 {
		t.Errorf("%d dead letters; not dead-lettered exactly once: %v", len(dls), want)
	}
	reasons := strings.Join(obsReasons, "\n")
	if !strings.Contains(reasons, fmt.Sprintf("invalid event: observation.text is %d bytes, limit %d", len(huge), events.DefaultMaxTextBytes)) ||
		!strings.Contains(reasons, "invalid event: observation.text is empty or whitespace") {
		t.Errorf("reasons on the observation subject:\n%s", reasons)
	}

	st, err := r.stack.Runtime().Sessions.Get(ctx, "acme", "u1", "s1")
	if err != nil || st.Messages != 1 {
		t.Fatalf("session state holds %d messages (%v); want the one valid message", st.Messages, err)
	}
	err = filepath.Walk(filepath.Join(r.cfg.Memory.Dir, "acme", "u1"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && info.Size() > events.DefaultMaxTextBytes {
			t.Errorf("%s is %d bytes: the oversize observation was extracted", path, info.Size())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
