package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/extract"
)

// fixSession publishes, as cl's agent, a session of user in which a tool
// fails with errText, the agent says fix and the user confirms, and ends it.
func fixSession(t *testing.T, cl *client.Client, user, session string, lines ...string) {
	t.Helper()
	ctx := context.Background()
	roles := []events.Role{events.RoleTool, events.RoleAssistant, events.RoleUser}
	for i, text := range lines {
		if _, err := cl.Say(ctx, user, session, roles[i%3], text, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.EndSession(ctx, user, session); err != nil {
		t.Fatal(err)
	}
}

// Issue 31, memory.agent_learning: the impersonal fix of a1's session with u1
// goes to a1's scope, the fix naming u1's address does not; the provenance
// (sessions and users) is in the extractor's state bucket, not in the
// memory; the same fix learned with u2 is one entry with both in its
// provenance; a1's pack for a third user carries it.
func TestAgentLearningPromotesImpersonalFixes(t *testing.T) {
	r := upStackWith(t, "AGENTMEM_MEMORY_AGENT_LEARNING=true")
	ctx := context.Background()
	a1 := r.agentClient(t, "a1")
	const fix = "Rename the column to Date"
	fixSession(t, a1, "u1", "s1",
		"KeyError: 'Date'", fix+".", "That worked.",
		"SMTPError: bounce from dana.whitfield@example.com", "Resend to dana.whitfield@example.com with the portal form.", "That worked.")
	r.waitIdle(t)

	owner := events.AgentOwner("a1")
	doc := r.file(t, owner, docstore.MemoryFile)
	es := entries(t, doc)
	if len(es) != 1 || !strings.Contains(es[0].Content, fix) || strings.Contains(doc, "dana") {
		t.Fatalf("a1's scope:\n%s\nwant the KeyError fix alone", doc)
	}
	if user := r.file(t, "u1", docstore.MemoryFile); !strings.Contains(user, fix) {
		t.Fatalf("u1's memory lost the fix:\n%s", user)
	}
	provenance := func() extract.LearnedProvenance {
		t.Helper()
		rt := r.stack.Runtime()
		p, err := extract.ReadProvenance(ctx, rt.JS, rt.Keyring, "", "acme", "a1", es[0].Content)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := provenance(); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u1", SessionID: "s1"}}) {
		t.Fatalf("provenance %+v", p)
	}
	if strings.Contains(doc, "u1") || strings.Contains(doc, "s1") {
		t.Fatalf("a1's scope names where it learned:\n%s", doc)
	}

	fixSession(t, a1, "u2", "s2", "KeyError: 'Date'", fix+".", "That worked.")
	r.waitIdle(t)
	if es := entries(t, r.file(t, owner, docstore.MemoryFile)); len(es) != 1 {
		t.Fatalf("a1's scope has %d entries, want the fix once", len(es))
	}
	if p := provenance(); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u1", SessionID: "s1"}, {UserID: "u2", SessionID: "s2"}}) {
		t.Fatalf("provenance %+v, want s1 and s2 of u1 and u2", p)
	}
	pack, err := a1.Context(ctx, events.ContextRequest{UserID: "u3", Query: "KeyError Date"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pack.AgentItems, func(it events.PackItem) bool { return strings.Contains(it.Text, fix) }) {
		t.Fatalf("a1's pack for u3: agent items %+v", pack.AgentItems)
	}
}

// Off (the default), nothing reaches the agent's scope.
func TestAgentLearningOffByDefault(t *testing.T) {
	r := upStack(t)
	fixSession(t, r.agentClient(t, "a1"), "u1", "s1", "KeyError: 'Date'", "Rename the column to Date.", "That worked.")
	r.waitIdle(t)
	if doc := r.file(t, events.AgentOwner("a1"), docstore.MemoryFile); doc != "" {
		t.Fatalf("a1's scope:\n%s", doc)
	}
	if user := r.file(t, "u1", docstore.MemoryFile); !strings.Contains(user, "Rename the column") {
		t.Fatalf("u1's memory:\n%s", user)
	}
}

// Issue 31: forgetting a user removes them, and their sessions, from where
// the agent's lessons were learned; the lessons stay, also the one learned
// from that user alone (it passed the personal filter: it is the agent's
// knowledge), its provenance then naming no source and counting one
// forgotten. Another user's sources stay as they were.
func TestForgetRemovesTheUserFromLessonProvenance(t *testing.T) {
	r := upStackWith(t, "AGENTMEM_MEMORY_AGENT_LEARNING=true")
	ctx := context.Background()
	a1 := r.agentClient(t, "a1")
	const shared, alone = "Rename the column to Date", "Pass the dates as YYYY-MM-DD"
	fixSession(t, a1, "u1", "s1", "KeyError: 'Date'", shared+".", "That worked.")
	fixSession(t, a1, "u2", "s2", "KeyError: 'Date'", shared+".", "That worked.")
	fixSession(t, a1, "u1", "s3", "ValueError: time data '3/4' does not match format", alone+".", "That worked.")
	r.waitIdle(t)

	owner := events.AgentOwner("a1")
	lesson := map[string]string{} // fix → the entry's content
	for _, e := range entries(t, r.file(t, owner, docstore.MemoryFile)) {
		for _, fix := range []string{shared, alone} {
			if strings.Contains(e.Content, fix) {
				lesson[fix] = e.Content
			}
		}
	}
	if len(lesson) != 2 {
		t.Fatalf("a1's scope:\n%s\nwant both fixes", r.file(t, owner, docstore.MemoryFile))
	}
	provenance := func(fix string) extract.LearnedProvenance {
		t.Helper()
		rt := r.stack.Runtime()
		p, err := extract.ReadProvenance(ctx, rt.JS, rt.Keyring, "", "acme", "a1", lesson[fix])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := provenance(alone); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u1", SessionID: "s3"}}) {
		t.Fatalf("provenance of the lesson learned from u1 alone: %+v", p)
	}

	rep, err := r.client.Forget(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Provenance != 2 {
		t.Errorf("forget u1 changed %d provenance records, want 2", rep.Provenance)
	}
	if p := provenance(shared); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u2", SessionID: "s2"}}) || p.Forgotten != 1 {
		t.Errorf("provenance of the lesson of u1 and u2 after forgetting u1: %+v", p)
	}
	if p := provenance(alone); len(p.Sources) != 0 || p.Forgotten != 1 || p.Content != lesson[alone] {
		t.Errorf("provenance of the lesson of u1 alone after forgetting u1: %+v", p)
	}
	doc := r.file(t, owner, docstore.MemoryFile)
	for _, fix := range []string{shared, alone} {
		if !strings.Contains(doc, fix) {
			t.Errorf("forgetting u1 took %q from a1's scope:\n%s", fix, doc)
		}
	}
	// Forgetting u1 again finds nothing more to remove.
	if rep, err := r.client.Forget(ctx, "u1"); err != nil || rep.Provenance != 0 {
		t.Errorf("second forget of u1: %+v %v", rep, err)
	}
}
