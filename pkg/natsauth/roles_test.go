package natsauth_test

import (
	"slices"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// Through the server: a tenant's credential, agent or admin, is refused each of
// its own tenant's internal subjects (the services publish them, and the
// consolidator, replay and rebuild apply what is there); an agent's is refused
// every admin endpoint and answered on every other; an admin's is answered on all.
func TestTenantRolesOnTheServer(t *testing.T) {
	a := authority(t, t.TempDir())
	srv, _ := provisioned(t, a)
	for _, role := range []natsauth.Role{natsauth.RoleAgent, natsauth.RoleAdmin} {
		nc, errs := conn(t, srv, roleCredsFile(t, a, "acme", role))
		for _, subj := range []string{
			"mem.acme.write.u1", "mem.acme.hit.u1", "mem.acme.written.u1",
			"mem.acme.summary.u1.s1", "mem.acme.consolidate.u1", "memdlq.ingest",
		} {
			if err := nc.Publish(subj, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			wantViolation(t, string(role)+" publishes "+subj, nc, errs)
		}
		for _, ep := range events.Endpoints {
			subj := "memrpc.acme." + ep
			refused := role == natsauth.RoleAgent && slices.Contains(events.AdminEndpoints, ep)
			timeout := 5 * time.Second
			if refused {
				// The server drops the request: waiting is for the refusal, below.
				timeout = 100 * time.Millisecond
			}
			rep, err := nc.Request(subj, []byte(`{}`), timeout)
			if refused {
				if err == nil {
					t.Fatalf("agent got a reply from %s: %q", subj, rep.Data)
				}
				wantViolation(t, "agent requests "+subj, nc, errs)
				continue
			}
			if err != nil || string(rep.Data) != subj {
				t.Fatalf("%s requests %s: %v %v", role, subj, rep, err)
			}
		}
	}
	for _, ep := range []string{"context", "search", "topic", "append", "add", "get", "history"} {
		if !slices.Contains(events.AgentEndpoints, ep) {
			t.Errorf("agents may not request %s", ep)
		}
	}
	for _, ep := range []string{"forget", "reset", "delete", "export", "import", "events.list", "events.get", "events.count", "policy.set", "policy.rollback", "backups.restore", "dlq.list", "dlq.replay", "tenant.append", "tenant.add", "tenant.item.save"} {
		if slices.Contains(events.AgentEndpoints, ep) || !slices.Contains(events.Endpoints, ep) {
			t.Errorf("%s: an agent endpoint, or no endpoint at all", ep)
		}
	}
}
