package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/natsauth"
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
		deadLetter(t, ctx, js, "acme", "s3", class, fmt.Sprintf("message %d", i))
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

// deadLetter stores in the dead-letter stream, as ingest would after an outage,
// a valid observation of user u1 in tenant's session with text, of reason class;
// it returns its sequence.
func deadLetter(t *testing.T, ctx context.Context, js jetstream.JetStream, tenant, session, class, text string) uint64 {
	t.Helper()
	env := events.New(events.TypeObservation, tenant, "u1", "bot", session)
	env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := env.Subject()
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("memdlq." + bus.WorkerIngest)
	msg.Data = data
	msg.Header.Set(bus.MetaSubject, subject)
	msg.Header.Set(bus.HeaderReason, "llm endpoint unavailable")
	msg.Header.Set(bus.HeaderReasonClass, class)
	msg.Header.Set(bus.MetaDeliveryCount, "1")
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// Issue 30: a tenant's admin credential lists and replays its own tenant's dead
// letters through the dlq endpoints (it may not use the JetStream API), never
// another tenant's; an agent credential is refused both by the server, at once;
// the operator (the service credential) still sees every tenant's.
func TestTenantAdminDeadLetters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, url, dir := upAuthForCLI(t, ctx)
	js := stack.Runtime().JS
	acme1 := deadLetter(t, ctx, js, "acme", "s1", bus.ClassRetriesExhausted, "acme letter one")
	globex := deadLetter(t, ctx, js, "globex", "s1", bus.ClassRetriesExhausted, "globex letter")
	acme2 := deadLetter(t, ctx, js, "acme", "s1", bus.ClassMaxDeliveries, "acme letter two")

	creds := map[string]string{}
	for _, c := range []struct{ name, tenant, role string }{{"acme-admin", "acme", "admin"}, {"acme-agent", "acme", "agent"}} {
		creds[c.name] = filepath.Join(t.TempDir(), c.name+".creds")
		if out, err := run(t, "creds", "add", "--data-dir", dir, "--tenant", c.tenant, "--role", c.role, "--out", creds[c.name]); err != nil {
			t.Fatalf("creds add: %v\n%s", err, out)
		}
	}
	seqLine := func(seq uint64) *regexp.Regexp { return regexp.MustCompile(fmt.Sprintf(`(?m)^%d\t`, seq)) }

	// The agent: refused by the server, at once, and nothing was replayed.
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", creds["acme-agent"])
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "replay", "--all"}} {
		start := time.Now()
		out, err := run(t, append(args, "--nats-url", url)...)
		if took := time.Since(start); !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "permissions violation") || took > 10*time.Second {
			t.Fatalf("%v with acme's agent credential: %v after %s, want the server's refusal at once\n%s", args, err, took, out)
		}
	}

	// The admin: acme's two, in order, not globex's, which it cannot replay either.
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", creds["acme-admin"])
	out, err := run(t, "dlq", "list", "--nats-url", url)
	if err != nil || !seqLine(acme1).MatchString(out) || !seqLine(acme2).MatchString(out) || seqLine(globex).MatchString(out) ||
		strings.Contains(out, "globex") || !strings.HasSuffix(out, "\n2 dead letter(s)\n") {
		t.Fatalf("dlq list with acme's admin credential: %v\n%s", err, out)
	}
	if out, err := run(t, "dlq", "replay", fmt.Sprint(globex), "--nats-url", url); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no dead letter with sequence %d", globex)) {
		t.Fatalf("acme's admin replayed globex's dead letter %d: %v\n%s", globex, err, out)
	}
	if out, err := run(t, "dlq", "list", "--tenant", "globex", "--nats-url", url); err == nil {
		t.Fatalf("acme's admin listed globex's dead letters:\n%s", out)
	}
	out, err = run(t, "dlq", "replay", "--all", "--nats-url", url)
	if err != nil || !strings.Contains(out, fmt.Sprintf("replayed %d to mem.acme.obs.u1.s1", acme1)) ||
		!strings.Contains(out, fmt.Sprintf("replayed %d to mem.acme.obs.u1.s1", acme2)) || !strings.Contains(out, "\n2 dead letter(s) replayed") {
		t.Fatalf("dlq replay --all with acme's admin credential: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, js, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st, err := stack.Runtime().Sessions.Get(ctx, "acme", "u1", "s1"); err != nil || st.Messages != 2 {
		t.Fatalf("acme's session after the replay: %+v, %v; want its 2 replayed messages", st, err)
	}
	if _, err := stack.Runtime().Sessions.Get(ctx, "globex", "u1", "s1"); err == nil {
		t.Fatal("globex's dead letter was replayed")
	}

	// The operator: globex's letter is still there, and only it.
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", filepath.Join(natsauth.KeyDir(dir), natsauth.ServiceCredsFile))
	out, err = run(t, "dlq", "list", "--nats-url", url)
	if err != nil || !seqLine(globex).MatchString(out) || !strings.HasSuffix(out, "\n1 dead letter(s)\n") {
		t.Fatalf("dlq list with the service credential: %v\n%s", err, out)
	}
}
