package app_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// agentClient is a client of tenant acme speaking as agent.
func (r rig) agentClient(t *testing.T, agent string) *client.Client {
	t.Helper()
	nc, err := nats.Connect(r.stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Config{Tenant: "acme", AgentID: agent})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// Issue 31, hand-over: agent a1 holds session s1 with u1 (a failed turn, an
// open session item) and ends it; a2 asking for u1 gets s1's summary and open
// items in the pack's "handover" section, marked a1; a1 asking again gets
// none; u2's pack never carries u1's session; when a1 takes u1 back after a2,
// the hand-over is a2's.
func TestHandoverBetweenAgents(t *testing.T) {
	r := upStack(t)
	ctx := context.Background()
	a1, a2 := r.agentClient(t, "a1"), r.agentClient(t, "a2")
	say := func(cl *client.Client, user, sess, text string) {
		t.Helper()
		if _, err := cl.Say(ctx, user, sess, events.RoleUser, text, nil); err != nil {
			t.Fatal(err)
		}
	}
	say(a1, "u1", "s1", "Ticket TCK-4417: the invoice export fails with error E42 on the March report.")
	turn, err := a1.StartTurn(ctx, "u1", "s1", "t1", "")
	if err != nil {
		t.Fatal(err)
	}
	turn.Plan = "re-run the March export with the patched template"
	if _, err := a1.FinishTurn(ctx, turn, events.TurnError, "export tool timed out"); err != nil {
		t.Fatal(err)
	}
	if _, err := a1.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: events.MemoryItem{
		Scope: events.ScopeSession, SessionID: "s1", Kind: events.ItemGoal, Key: "next-step", Content: "send the fixed March report", Confidence: 1,
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a1.EndSession(ctx, "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	say(a1, "u2", "s9", "My badge number is 7781 and the printer on floor 3 jams.")
	if _, err := a1.EndSession(ctx, "u2", "s9"); err != nil {
		t.Fatal(err)
	}
	r.waitIdle(t)

	pack, err := a2.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	h := pack.Handover
	if h == nil || h.AgentID != "a1" || h.SessionID != "s1" || !strings.Contains(h.Summary, "TCK-4417") {
		t.Fatalf("a2's pack for u1: handover %+v, want s1 of a1 with its summary", h)
	}
	if len(h.OpenItems) != 1 || h.OpenItems[0].Key != "next-step" || len(h.OpenTurns) != 1 || h.OpenTurns[0].TurnID != "t1" || h.OpenTurns[0].Status != events.TurnError {
		t.Fatalf("open items %+v, open turns %+v: want the goal next-step and the failed turn t1", h.OpenItems, h.OpenTurns)
	}
	for _, want := range []string{"## Handover from agent a1 (session s1)", "TCK-4417", "- open goal next-step: send the fixed March report", "- unfinished turn t1 [error]: re-run the March export"} {
		if !strings.Contains(pack.Prompt, want) {
			t.Fatalf("prompt lacks %q:\n%s", want, pack.Prompt)
		}
	}
	if !slices.ContainsFunc(pack.Sections, func(s events.PackSection) bool { return s.Name == "handover" && s.Entries == 3 }) {
		t.Fatalf("sections %+v: want handover with 3 entries", pack.Sections)
	}
	if err := pack.Validate(); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(pack)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"handover":{"agent_id":"a1","session_id":"s1"`) {
		t.Fatalf("JSON lacks the handover field: %s", raw)
	}

	// The agent that held the session gets no hand-over of its own session.
	if pack, err := a1.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s3"}); err != nil || pack.Handover != nil || strings.Contains(pack.Prompt, "Handover") {
		t.Fatalf("a1's pack for u1: %v, handover %+v", err, pack.Handover)
	}
	// Another user's hand-over is that user's own session, never u1's.
	pack, err = a2.Context(ctx, events.ContextRequest{UserID: "u2"})
	if err != nil {
		t.Fatal(err)
	}
	if h := pack.Handover; h == nil || h.SessionID != "s9" || !strings.Contains(h.Summary, "7781") || strings.Contains(pack.Prompt, "TCK-4417") || strings.Contains(pack.Prompt, "next-step") {
		t.Fatalf("a2's pack for u2: handover %+v\n%s", h, pack.Prompt)
	}

	// a2 works with u1 in s2; a1 taking u1 back in s3 gets a2's session, and a2,
	// still in s2, keeps a1's.
	say(a2, "u1", "s2", "The patched template fixed E42; only the totals row is still off by one.")
	r.waitIdle(t)
	if pack, err := a1.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s3"}); err != nil || pack.Handover == nil || pack.Handover.AgentID != "a2" || !strings.Contains(pack.Handover.Summary, "totals row") {
		t.Fatalf("a1 back with u1: %v, handover %+v", err, pack.Handover)
	}
	if pack, err := a2.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s2"}); err != nil || pack.Handover == nil || pack.Handover.SessionID != "s1" {
		t.Fatalf("a2 in s2: %v, handover %+v", err, pack.Handover)
	}
}
