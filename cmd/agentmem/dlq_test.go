package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
)

// Issue 22: dead letters (as an outage left them before outages were waited
// out) are replayed in one command, by reason class or all at once, processed,
// and gone from the list.
func TestDLQReplayAllAndByReason(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, url := upForCLI(t, ctx)
	js := stack.Runtime().JS

	for i, class := range []string{bus.ClassRetriesExhausted, bus.ClassMaxDeliveries, bus.ClassRetriesExhausted} {
		env := events.New(events.TypeObservation, "acme", "u1", "bot", "s3")
		env.Observation = &events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("message %d", i)}
		data, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg("memdlq." + bus.WorkerIngest)
		msg.Data = data
		msg.Header.Set(bus.MetaSubject, "mem.acme.obs.u1.s3")
		msg.Header.Set(bus.HeaderReason, "llm endpoint unavailable")
		msg.Header.Set(bus.HeaderReasonClass, class)
		msg.Header.Set(bus.MetaDeliveryCount, "1")
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	list := func(want int) {
		t.Helper()
		out, err := run(t, "dlq", "list", "--nats-url", url)
		if err != nil || !strings.HasSuffix(out, fmt.Sprintf("\n%d dead letter(s)\n", want)) && out != fmt.Sprintf("%d dead letter(s)\n", want) {
			t.Fatalf("dlq list: %v\n%s", err, out)
		}
	}
	list(3)
	// Each wrong use is told what is wrong with it, not one message for all.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "which dead letters?"},
		{[]string{"replay", "1", "--all"}, "by sequence or select them with --all or --reason, not both"},
		{[]string{"replay", "--all", "--reason", bus.ClassMaxDeliveries}, "give --all or --reason, not both"},
		{[]string{"replay", "--reason", "bogus"}, `--reason "bogus": want one of`},
	} {
		if out, err := run(t, append(append([]string{"dlq"}, tc.args...), "--nats-url", url)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("dlq %v = %v, want an error saying %q\n%s", tc.args, err, tc.want, out)
		}
	}
	out, err := run(t, "dlq", "replay", "--reason", bus.ClassRetriesExhausted, "--nats-url", url)
	if err != nil || !strings.Contains(out, "2 dead letter(s) replayed") {
		t.Fatalf("dlq replay --reason: %v\n%s", err, out)
	}
	list(1)
	if out, err := run(t, "dlq", "replay", "--all", "--nats-url", url); err != nil || !strings.Contains(out, "1 dead letter(s) replayed") {
		t.Fatalf("dlq replay --all: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, js, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	list(0)
	st, err := stack.Runtime().Sessions.Get(ctx, "acme", "u1", "s3")
	if err != nil || st.Messages != 3 {
		t.Fatalf("session state = %+v, %v; want the 3 replayed messages", st, err)
	}
}
