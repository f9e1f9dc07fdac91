package natsauth_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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

// agentCredsFile issues tenant's agent credential bound to agentID into a file.
func agentCredsFile(t *testing.T, a *natsauth.Authority, tenant, agentID string) string {
	t.Helper()
	creds, err := a.AgentCreds(tenant, agentID)
	return writeCredsFile(t, creds, err)
}

// Issue 31, through the server: an agent credential bound to Bot-A writes
// Bot-A's scope (memrpc.acme.agent.Bot-A.<op>) and no other agent's, not
// another case of its id, not another tenant's Bot-A; an agent credential
// bound to none writes no agent's scope; an admin writes any agent's. The
// agent id is read back from the credential, case kept.
func TestAgentCredentialWritesItsOwnAgentScopeOnly(t *testing.T) {
	a := authority(t, t.TempDir())
	srv, _ := provisioned(t, a)
	boundFile := agentCredsFile(t, a, "acme", "Bot-A")
	id, err := natsauth.InspectFile(boundFile)
	if err != nil || id.AgentID != "Bot-A" || id.Role != natsauth.RoleAgent || id.Tenant != "acme" {
		t.Fatalf("bound credential reads as %+v (%v)", id, err)
	}
	if id, _ := natsauth.InspectFile(roleCredsFile(t, a, "acme", natsauth.RoleAgent)); id.AgentID != "" {
		t.Fatalf("unbound credential reads as bound to %q", id.AgentID)
	}
	type client struct {
		name string
		nc   *nats.Conn
		errs <-chan error
	}
	connect := func(name, file string) client {
		nc, errs := conn(t, srv, file)
		return client{name, nc, errs}
	}
	bound := connect("Bot-A's credential", boundFile)
	unbound := connect("an unbound agent credential", roleCredsFile(t, a, "acme", natsauth.RoleAgent))
	admin := connect("the admin credential", roleCredsFile(t, a, "acme", natsauth.RoleAdmin))
	answered := func(c client, subj string) {
		t.Helper()
		rep, err := c.nc.Request(subj, []byte(`{}`), 5*time.Second)
		if err != nil || string(rep.Data) != subj {
			t.Fatalf("%s requests %s: %v %v", c.name, subj, rep, err)
		}
	}
	refused := func(c client, subj string) {
		t.Helper()
		// The server drops the request: waiting is for the refusal.
		if rep, err := c.nc.Request(subj, []byte(`{}`), 100*time.Millisecond); err == nil {
			t.Fatalf("%s got a reply from %s: %q", c.name, subj, rep.Data)
		}
		wantViolation(t, c.name+" requests "+subj, c.nc, c.errs)
	}
	for _, ep := range events.AgentScopeEndpoints {
		own, err := events.AgentRPCSubject("acme", "Bot-A", ep)
		if err != nil {
			t.Fatal(err)
		}
		answered(bound, own)
		answered(admin, own)
		refused(unbound, own)
		for _, other := range [][2]string{{"acme", "Bot-B"}, {"acme", "bot-a"}, {"acme", "Bot-A2"}, {"globex", "Bot-A"}} {
			subj, err := events.AgentRPCSubject(other[0], other[1], ep)
			if err != nil {
				t.Fatal(err)
			}
			refused(bound, subj)
			refused(unbound, subj)
			if other[0] == "acme" {
				answered(admin, subj)
			}
		}
	}
	// Its user-scope writes stay what any agent credential may request.
	answered(bound, "memrpc.acme.append")
	refused(bound, "memrpc.acme.tenant.append")

	for _, bad := range []string{"", "a.b", "*", ">", "a b", strings.Repeat("x", events.MaxAgentIDLength+1)} {
		if _, err := a.AgentCreds("acme", bad); !errors.Is(err, natsauth.ErrInvalidAgent) {
			t.Errorf("AgentCreds(%q) = %v, want ErrInvalidAgent", bad, err)
		}
	}
	creds, err := a.List("acme")
	if err != nil {
		t.Fatal(err)
	}
	var agents []string
	for _, c := range creds {
		if c.Agent != "" {
			agents = append(agents, c.Agent)
		}
	}
	if !slices.Equal(agents, []string{"Bot-A"}) {
		t.Errorf("register's bound agents %q, want Bot-A", agents)
	}
}
