package events

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Which write requests name a scope rightly, and which owner id each lands in.
func TestScopedWriteRequests(t *testing.T) {
	long := strings.Repeat("a", MaxAgentIDLength+1)
	for _, tc := range []struct {
		req   AppendRequest
		owner string // "" when invalid
		field string // the field an invalid request's error names
	}{
		{AppendRequest{UserID: "u1", Content: "x"}, "u1", ""},
		{AppendRequest{UserID: "u1", Content: "x", Scope: MemoryScopeUser}, "u1", ""},
		{AppendRequest{Content: "x"}, "", "user_id"},
		{AppendRequest{Content: "x", Scope: MemoryScopeAgent, AgentID: "bot"}, "__agent_bot", ""},
		{AppendRequest{UserID: "u1", Content: "x", Scope: MemoryScopeAgent, AgentID: "bot"}, "__agent_bot", ""},
		{AppendRequest{UserID: "__agent_bot", Content: "x", Scope: MemoryScopeAgent, AgentID: "bot"}, "__agent_bot", ""},
		{AppendRequest{UserID: "__tenant", Content: "x", Scope: MemoryScopeAgent, AgentID: "bot"}, "", "user_id"},
		{AppendRequest{Content: "x", Scope: MemoryScopeAgent}, "", "agent_id"},
		{AppendRequest{Content: "x", Scope: MemoryScopeAgent, AgentID: long}, "", "agent_id"},
		{AppendRequest{Content: "x", Scope: MemoryScopeTenant}, "__tenant", ""},
		{AppendRequest{UserID: "__tenant", Content: "x", Scope: MemoryScopeTenant}, "__tenant", ""},
		{AppendRequest{Content: "x", Scope: "team"}, "", "scope"},
	} {
		err := tc.req.Validate()
		if (err == nil) != (tc.owner != "") {
			t.Errorf("%+v: Validate = %v", tc.req, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%+v: %v does not name %s", tc.req, err, tc.field)
			}
			continue
		}
		scope, user, agent := tc.req.Target()
		owner, err := ScopeOwner(scope, user, agent)
		if err != nil || owner != tc.owner || OwnerScope(owner) != scope.Effective() {
			t.Errorf("%+v: owner %q (%v), want %q", tc.req, owner, err, tc.owner)
		}
	}
	if _, err := ScopeOwner(MemoryScopeUser, TenantOwner, ""); err == nil {
		t.Error("a user scope owned by the tenant's owner id")
	}
}

// A session is a user's: an observation or session end naming a scope's owner
// id is invalid, a write event of it is not.
func TestReservedUserIDsInEvents(t *testing.T) {
	obs := New(TypeObservation, "acme", TenantOwner, "bot", "s1")
	obs.Observation = &Observation{Role: RoleUser, Text: "hello"}
	ended := New(TypeSessionEnded, "acme", AgentOwner("bot"), "bot", "s1")
	for _, env := range []Envelope{obs, ended} {
		if err := env.Validate(); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("%s of %s: %v", env.Type, env.UserID, err)
		}
	}
	w := Envelope{ID: "w1", Type: TypeWrite, SchemaVersion: SchemaVersion, TS: time.Now(), Tenant: "acme", UserID: TenantOwner,
		Write: &Write{Op: EndpointAppend, Request: []byte(`{"user_id":"__tenant","content":"x","scope":"tenant"}`)}}
	if err := w.Validate(); err != nil {
		t.Errorf("write event of the tenant scope: %v", err)
	}
}

// The shared scopes' writes have endpoints of their own: the tenant scope's
// admin-only, the agent scope's on subjects that carry the agent id.
func TestSharedScopeEndpoints(t *testing.T) {
	for op, want := range map[string][2]string{
		EndpointAppend:   {EndpointTenantAppend, EndpointAgentAppend},
		EndpointAdd:      {EndpointTenantAdd, EndpointAgentAdd},
		EndpointItemSave: {EndpointTenantItemSave, EndpointAgentItemSave},
	} {
		for i, scope := range []MemoryScope{MemoryScopeTenant, MemoryScopeAgent} {
			if got := ScopedEndpoint(op, scope); got != want[i] {
				t.Errorf("ScopedEndpoint(%s, %s) = %s", op, scope, got)
			}
			if back, sc, ok := ScopeEndpointOp(want[i]); !ok || back != op || sc != scope {
				t.Errorf("ScopeEndpointOp(%s) = %s %s %v", want[i], back, sc, ok)
			}
		}
		if got := ScopedEndpoint(op, MemoryScopeUser); got != op {
			t.Errorf("ScopedEndpoint(%s, user) = %s", op, got)
		}
		if !oneOf(want[0], AdminEndpoints) || oneOf(want[0], AgentEndpoints) {
			t.Errorf("%s is not admin-only", want[0])
		}
		if oneOf(want[1], Endpoints) || oneOf(want[1], AgentEndpoints) || !oneOf(want[1], AgentScopeEndpoints) {
			t.Errorf("%s is requested on memrpc.<tenant>.<endpoint>", want[1])
		}
	}
	if _, _, ok := ScopeEndpointOp(EndpointAppend); ok {
		t.Error("append is a shared scope's endpoint")
	}
	if got := ReadOwners("u1", ""); strings.Join(got, ",") != "u1,__tenant" {
		t.Errorf("ReadOwners without agent = %v", got)
	}
	if got := ReadOwners("u1", "bot"); strings.Join(got, ",") != "u1,__agent_bot,__tenant" {
		t.Errorf("ReadOwners = %v", got)
	}
}

// The agent-scope writes' subjects carry the agent id as one token, parse back
// to their tenant, endpoint and agent, and are never built from an id that
// is not one token or too long for its owner id.
func TestAgentScopeSubjects(t *testing.T) {
	for ep, want := range map[string]string{
		EndpointAgentAppend:   "memrpc.acme.agent.Bot-A.append",
		EndpointAgentAdd:      "memrpc.acme.agent.Bot-A.add",
		EndpointAgentItemSave: "memrpc.acme.agent.Bot-A.item.save",
	} {
		got, err := RequestSubject("acme", "Bot-A", ep)
		if err != nil || got != want {
			t.Errorf("RequestSubject(%s) = %q %v, want %q", ep, got, err, want)
		}
		sub, err := ParseSubject(want)
		if err != nil || sub != (Subject{Kind: SubjectRPC, Tenant: "acme", Endpoint: ep, Agent: "Bot-A"}) {
			t.Errorf("ParseSubject(%s) = %+v %v", want, sub, err)
		}
		if svc, _ := RPCServiceSubject(ep); svc != strings.Replace(strings.Replace(want, "acme", "*", 1), "Bot-A", "*", 1) {
			t.Errorf("RPCServiceSubject(%s) = %s", ep, svc)
		}
		if _, err := RPCSubject("acme", ep); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("RPCSubject(%s) without an agent: %v", ep, err)
		}
		for _, bad := range []string{"", "a.b", "*", ">", "a b", strings.Repeat("x", MaxAgentIDLength+1)} {
			if s, err := AgentRPCSubject("acme", bad, ep); !errors.Is(err, ErrInvalidSubject) {
				t.Errorf("AgentRPCSubject(%q, %s) = %q %v", bad, ep, s, err)
			}
		}
	}
	if got, err := RequestSubject("acme", "Bot-A", EndpointAppend); err != nil || got != "memrpc.acme.append" {
		t.Errorf("RequestSubject(append) = %q %v", got, err)
	}
	for _, bad := range []string{"memrpc.acme.agent", "memrpc.acme.agent.Bot-A", "memrpc.acme.agent.Bot-A.delete", "memrpc.acme.agent.*.append", "memrpc.acme.agent..append"} {
		if sub, err := ParseSubject(bad); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("ParseSubject(%s) = %+v %v", bad, sub, err)
		}
	}
}
