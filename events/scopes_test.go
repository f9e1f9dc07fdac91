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

// The tenant scope's writes have endpoints of their own, admin-only.
func TestTenantScopeEndpoints(t *testing.T) {
	for op, want := range map[string]string{EndpointAppend: EndpointTenantAppend, EndpointAdd: EndpointTenantAdd, EndpointItemSave: EndpointTenantItemSave} {
		if got := ScopedEndpoint(op, MemoryScopeTenant); got != want {
			t.Errorf("ScopedEndpoint(%s, tenant) = %s", op, got)
		}
		if got := ScopedEndpoint(op, MemoryScopeAgent); got != op {
			t.Errorf("ScopedEndpoint(%s, agent) = %s", op, got)
		}
		if back, ok := TenantEndpointOp(want); !ok || back != op {
			t.Errorf("TenantEndpointOp(%s) = %s %v", want, back, ok)
		}
		if !oneOf(want, AdminEndpoints) || oneOf(want, AgentEndpoints) {
			t.Errorf("%s is not admin-only", want)
		}
	}
	if got := ReadOwners("u1", ""); strings.Join(got, ",") != "u1,__tenant" {
		t.Errorf("ReadOwners without agent = %v", got)
	}
	if got := ReadOwners("u1", "bot"); strings.Join(got, ",") != "u1,__agent_bot,__tenant" {
		t.Errorf("ReadOwners = %v", got)
	}
}
