package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
)

// D2: the event history is reachable from the command line through the retriever.
func TestEventsCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, url := upForCLI(t, ctx)
	ns := []string{"--nats-url", url, "--tenant", "acme"}
	for _, s := range []string{"s1", "s1", "s2"} {
		if out, err := run(t, append([]string{"observe", "--user", "u1", "--session", s, "--text", "hello from " + s}, ns...)...); err != nil {
			t.Fatalf("observe: %v\n%s", err, out)
		}
	}
	out, err := run(t, append([]string{"events", "count", "--user", "u1", "--session", "s1"}, ns...)...)
	if err != nil || strings.TrimSpace(out) != "2" {
		t.Fatalf("events count = %q, %v; want 2", out, err)
	}
	out, err = run(t, append([]string{"events", "list", "--user", "u1", "--json", "--since", "1h"}, ns...)...)
	if err != nil {
		t.Fatalf("events list: %v\n%s", err, out)
	}
	var rep events.EventsListReply
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	obs := 0
	for _, e := range rep.Events {
		if e.Event.Type == events.TypeObservation {
			obs++
		}
	}
	if obs != 3 {
		t.Fatalf("events list has %d observations, want 3:\n%s", obs, out)
	}
	id := rep.Events[0].Event.ID
	out, err = run(t, append([]string{"events", "get", id}, ns...)...)
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "hello from s1") {
		t.Fatalf("events get = %q, %v", out, err)
	}
	if out, err := run(t, append([]string{"events", "list", "--session", "s1"}, ns...)...); err == nil {
		t.Fatalf("--session without --user accepted:\n%s", out)
	}
}

// A write event's line names its op and what it wrote.
func TestEventLineOfAWrite(t *testing.T) {
	env := events.New(events.TypeWrite, "acme", "u1", "agentmem-cli", "")
	env.Write = &events.Write{Op: events.EndpointAppend, Request: json.RawMessage(`{"user_id":"u1","content":"Reports go to finance."}`)}
	line := eventLine(events.StoredEvent{Seq: 7, Event: env})
	if !strings.Contains(line, "\twrite\t") || !strings.Contains(line, "append ") || !strings.Contains(line, "Reports go to finance.") {
		t.Fatalf("line = %q", line)
	}
}
