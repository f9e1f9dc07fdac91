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
// whole stack: ingest announces summary_due, the extractor summarises. The
// threshold is 29 so that the 30th message is the one that crosses it: the
// summary then covers all but the last 4, whenever the extractor runs.
func TestContextJSONShowsSessionSummary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, url := upForCLI(t, ctx, "AGENTMEM_MEMORY_SESSION_SUMMARY_MESSAGE_THRESHOLD=29")
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
	if !strings.Contains(pack.SessionSummary, "report_25.csv") || len(pack.RecentEvents) != 4 || pack.SessionSummarySource == nil || pack.SessionSummarySource.Messages != 26 {
		t.Fatalf("summary %q, source %+v, %d recent events\n%s", pack.SessionSummary, pack.SessionSummarySource, len(pack.RecentEvents), out)
	}
	if !strings.Contains(out, `"session_summary":`) {
		t.Fatalf("no session_summary key:\n%s", out)
	}
}
