package retrieve

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/lifecycle"
)

// An applied evolution proposal reaches new sessions only; a session already
// running keeps the policy it started with; rollback restores it for the
// sessions after (SPEC B5).
func TestEvolvedPolicyReachesNewSessionsOnly(t *testing.T) {
	r := newRig(t)
	svc := r.start(Config{})
	ctx := context.Background()
	ns := docstore.Namespace{Tenant: tenant, User: "u1"}
	ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "running"}))

	p := lifecycle.Proposal{Changes: map[string]json.RawMessage{"recent_days": json.RawMessage("9")}}
	outcome, snapshot, err := lifecycle.ApplyProposal(ctx, r.docs, ns, svc.cfg.Policy, p, nil)
	if err != nil || outcome != lifecycle.ProposalApplied {
		t.Fatalf("%q, %v", outcome, err)
	}
	if got := svc.policyFor(ctx, ns, "running").RecentDays; got != 3 {
		t.Fatalf("the running session's recent_days changed to %d", got)
	}
	if got := svc.policyFor(ctx, ns, "new").RecentDays; got != 9 {
		t.Fatalf("a new session's recent_days is %d, want 9", got)
	}
	r.now = r.now.Add(1e9)
	must(t, r.docs.RestorePolicySnapshot(ctx, ns, snapshot))
	if got := svc.policyFor(ctx, ns, "after-rollback").RecentDays; got != 3 {
		t.Fatalf("after rollback recent_days is %d, want 3", got)
	}
}
