package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/session"
)

// A 30-message session through the whole stack whose summaries the model
// answers with JSON lacking "summary" (issue 28; SPEC C9), in a context window
// the session overflows (SPEC B2): the extractor writes the offline summary in
// the model's place, marked rules_fallback, and dead-letters nothing; the pack
// holds the summary and exactly keep_count messages, the rest digested; a
// redelivered summary_due writes nothing. (The emergency path, for a model that
// stays unavailable, is TestSessionSummaryEmergencyWhenTheModelIsDown's, in
// pkg/lifecycle: a model down altogether pauses the workers, ingest included.)
func TestSessionSummaryFallbackThroughTheStack(t *testing.T) {
	ctx := context.Background()
	m := llmtest.NewModel(t)
	m.SetAnswer(llmtest.StepSummarize, func(string) string { return `{"text": "a summary under the wrong name"}` })
	r := upStackWith(t,
		"AGENTMEM_LLM_BASE_URL="+m.URL(),
		"AGENTMEM_LLM_MODEL=fake",
		"AGENTMEM_LLM_MAX_RETRIES=1",
		"AGENTMEM_LLM_TIMEOUT=5s",
		"AGENTMEM_MEMORY_CONTEXT_WINDOW_TOKENS=300",
		"AGENTMEM_MEMORY_SESSION_SUMMARY_TOKEN_PERCENT=100",
	)
	for i := range 30 {
		role := []events.Role{events.RoleUser, events.RoleAssistant}[i%2]
		r.say(t, "u1", "s1", role, fmt.Sprintf("Message %d: invoice INV-%03d is due on 2026-12-%02d.", i, i, i%28+1))
	}
	r.waitIdle(t)

	sessions := r.stack.Runtime().Sessions
	sum, rev, err := sessions.GetSummary(ctx, "acme", "u1", "s1")
	// How many messages it covers depends on when ingest's summary_due fired;
	// the pack below holds the rest digested.
	if err != nil || sum.By != session.SummaryByRulesFallback || sum.Dropped != 0 || sum.Messages == 0 || !strings.Contains(sum.Text, "INV-000") {
		t.Fatalf("summary %+v, %v: want the offline one, by rules_fallback, nothing dropped", sum, err)
	}
	if dls, err := bus.ListDeadLetters(ctx, r.stack.Runtime().JS, bus.DefaultDLQStream, 10); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters %+v, %v; want none", dls, err)
	}
	pack, err := r.client.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s1", MaxTokens: 100000})
	if err != nil {
		t.Fatal(err)
	}
	src := pack.SessionSummarySource
	if len(pack.RecentEvents) != 4 || !strings.Contains(pack.RecentEvents[0].Obs.Text, "Message 26:") || src == nil || src.Messages != 26 ||
		src.Parts[0].By != session.SummaryByRulesFallback || src.Dropped != 0 {
		t.Fatalf("%d recent events, source %+v", len(pack.RecentEvents), src)
	}
	if !strings.Contains(pack.SessionSummary, "INV-025") {
		t.Fatalf("the messages before the last 4 are not digested: %q", pack.SessionSummary)
	}

	// A redelivery of the summary_due the summary was written for.
	js := r.stack.Runtime().JS
	dues := bustest.StreamEvents(t, js, "mem.acme.summary.")
	i := slices.IndexFunc(dues, func(e events.Envelope) bool { return e.ID == sum.DueID })
	if i < 0 {
		t.Fatalf("no summary_due %q in the stream", sum.DueID)
	}
	due := dues[i]
	data, err := json.Marshal(due)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := events.SummaryDueSubject("acme", "u1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, due.ID+"-redelivered")
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	r.waitIdle(t)
	if again, rev2, err := sessions.GetSummary(ctx, "acme", "u1", "s1"); err != nil || rev2 != rev || again.Text != sum.Text {
		t.Fatalf("a redelivered summary_due rewrote the summary: revision %d → %d, %+v, %v", rev, rev2, again, err)
	}
}
