package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
)

// A session past its summary threshold comes back from `agentmem context --json`
// with session_summary and its last keep_count messages (SPEC B2), through the
// whole stack: ingest announces summary_due past 20 messages, the extractor
// summarises what it has then, and the pack digests the messages between that
// summary and the last 4, whenever the extractor ran.
func TestContextJSONShowsSessionSummary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, url := upForCLI(t, ctx, "AGENTMEM_MEMORY_SESSION_SUMMARY_MESSAGE_THRESHOLD=20")
	ns := []string{"--nats-url", url, "--tenant", "acme", "--user", "u1", "--session", "s1"}
	for i := range 30 {
		role := []string{"user", "assistant"}[i%2]
		text := fmt.Sprintf("Message %d: the deadline for report_%d.csv is 2026-12-%02d.", i, i, i%28+1)
		if out, err := run(t, append([]string{"observe", "--role", role, "--text", text}, ns...)...); err != nil {
			t.Fatalf("observe: %v\n%s", err, out)
		}
	}
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, append([]string{"context", "--json"}, ns...)...)
	if err != nil {
		t.Fatalf("context: %v\n%s", err, out)
	}
	var pack events.ContextPack
	if err := json.Unmarshal([]byte(out), &pack); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	src := pack.SessionSummarySource
	if !strings.Contains(pack.SessionSummary, "report_25.csv") || strings.Contains(pack.SessionSummary, "report_26.csv") || len(pack.RecentEvents) != 4 ||
		src == nil || src.Messages != 26 || len(src.Parts) == 0 || src.Parts[0].By != "rules" {
		t.Fatalf("summary %q, source %+v, %d recent events\n%s", pack.SessionSummary, pack.SessionSummarySource, len(pack.RecentEvents), out)
	}
	if !strings.Contains(out, `"session_summary":`) {
		t.Fatalf("no session_summary key:\n%s", out)
	}
}

// With memory.evolution_enabled, a session whose user keeps referring to
// earlier conversations evolves the policy through the whole stack (SPEC B5):
// the extractor reflects after the session's summary_due, and `agentmem policy
// history` shows the snapshot taken first.
func TestEvolutionThroughTheStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, url := upForCLI(t, ctx, "AGENTMEM_MEMORY_EVOLUTION_ENABLED=true")
	ns := []string{"--nats-url", url, "--tenant", "acme", "--user", "u1"}
	for i := range 21 {
		text := "fine"
		if i < 4 {
			text = fmt.Sprintf("As I said last week, invoice %d is late.", i)
		}
		if out, err := run(t, append([]string{"observe", "--session", "s1", "--text", text}, ns...)...); err != nil {
			t.Fatalf("observe: %v\n%s", err, out)
		}
	}
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, append([]string{"policy", "show"}, ns...)...)
	if err != nil || !strings.Contains(out, `"recent_days": 6`) {
		t.Fatalf("policy show: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"policy", "history"}, ns...)...); err != nil || !strings.Contains(out, "policy_snapshots/") {
		t.Fatalf("policy history: %v\n%s", err, out)
	}
}
