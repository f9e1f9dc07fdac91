package events

import (
	"fmt"
	"strings"
)

// MemoryScope says whose memory a write goes to and a read item comes from
// (contract v1.x, "Memory scopes" in the README). It is not a memory item's
// Scope (persona, user, session, ...), which says what an item is about within
// one memory: every item of the user scope has one of those.
type MemoryScope string

// Memory scopes.
const (
	// MemoryScopeUser is one (tenant, user)'s memory: what memory was before
	// scopes, and the default of every request.
	MemoryScopeUser MemoryScope = "user"
	// MemoryScopeAgent is one (tenant, agent_id)'s memory: how that agent does
	// its work, for every user it serves.
	MemoryScopeAgent MemoryScope = "agent"
	// MemoryScopeTenant is shared by every user and agent of a tenant; only an
	// admin credential writes it (the tenant.* endpoints).
	MemoryScopeTenant MemoryScope = "tenant"
)

// MemoryScopes lists every memory scope.
var MemoryScopes = []MemoryScope{MemoryScopeUser, MemoryScopeAgent, MemoryScopeTenant}

// Effective is s, or MemoryScopeUser when empty.
func (s MemoryScope) Effective() MemoryScope {
	if s == "" {
		return MemoryScopeUser
	}
	return s
}

// The agent and tenant scopes are stored as the memory of an owner id in the
// user id's place (Markdown directory, vector and item user_id, write subject
// mem.<tenant>.write.<owner>), so every store, the write log, replay,
// consolidation and tenant erase/export treat them like a user's memory and
// never mix them with one. Owner ids start with ReservedUserPrefix, which no
// user id may (the retriever refuses it on every write; observations and
// session ends with it are invalid), so a scope is written only through its
// scope field.
const (
	// ReservedUserPrefix starts the owner ids of the agent and tenant scopes.
	ReservedUserPrefix = "__"
	agentOwnerPrefix   = ReservedUserPrefix + "agent_"
	// TenantOwner is the owner id of the tenant scope.
	TenantOwner = ReservedUserPrefix + "tenant"
	// MaxAgentIDLength is the longest agent id that has an agent scope: its
	// owner id must still be a valid id.
	MaxAgentIDLength = MaxIDLength - len(agentOwnerPrefix)
)

// IsReservedUserID reports whether id is an owner id of a scope, which no
// user may have.
func IsReservedUserID(id string) bool { return strings.HasPrefix(id, ReservedUserPrefix) }

// AgentOwner is the owner id of agentID's agent scope.
func AgentOwner(agentID string) string { return agentOwnerPrefix + agentID }

// ScopeOwner is the owner id a scope's memory is stored under: the user id
// for the user scope, AgentOwner(agentID) for the agent scope, TenantOwner for
// the tenant scope. Errors wrap ErrInvalidID or name the missing field.
func ScopeOwner(scope MemoryScope, userID, agentID string) (string, error) {
	switch scope.Effective() {
	case MemoryScopeUser:
		if err := ValidateID("user_id", userID); err != nil {
			return "", err
		}
		if IsReservedUserID(userID) {
			return "", ruleError("user_id", "is %q; ids starting with %q are reserved for the agent and tenant scopes", userID, ReservedUserPrefix)
		}
		return userID, nil
	case MemoryScopeAgent:
		if err := ValidateAgentID(agentID); err != nil {
			return "", fmt.Errorf("%w (required for scope agent)", err)
		}
		return AgentOwner(agentID), nil
	case MemoryScopeTenant:
		return TenantOwner, nil
	}
	return "", enumError("scope", scope, MemoryScopes)
}

// OwnerScope is the scope whose memory owner holds: agent or tenant for their
// owner ids, user for any other id.
func OwnerScope(owner string) MemoryScope {
	switch {
	case owner == TenantOwner:
		return MemoryScopeTenant
	case strings.HasPrefix(owner, agentOwnerPrefix):
		return MemoryScopeAgent
	}
	return MemoryScopeUser
}

// ReadOwners are the owner ids a read (context, search) composes, in pack
// order: the user, agentID's agent scope when agentID is set and short enough
// to have one, and the tenant.
func ReadOwners(userID, agentID string) []string {
	owners := []string{userID}
	if agentID != "" && len(agentID) <= MaxAgentIDLength {
		owners = append(owners, AgentOwner(agentID))
	}
	return append(owners, TenantOwner)
}

// validateScoped checks the scope fields of a write request (append, add,
// item.save): for the user scope a user id; for the agent scope an agent id;
// user_id may then be empty, the caller's, or the scope's own owner id (the
// request as the retriever records it, see Scoped). A user-scope request
// naming an owner id is refused at the retriever's door (every write endpoint
// refuses one), not here: the stores hold a shared scope's memory under its
// owner id and validate their requests with it.
func validateScoped(scope MemoryScope, userID, agentID string) error {
	if scope.Effective() == MemoryScopeUser {
		return ValidateID("user_id", userID)
	}
	owner, err := ScopeOwner(scope, userID, agentID)
	if err != nil || userID == "" || userID == owner {
		return err
	}
	return firstError(ValidateID("user_id", userID), notReserved("user_id", userID))
}

func notReserved(path, id string) error {
	if IsReservedUserID(id) {
		return ruleError(path, "is %q; ids starting with %q are reserved for the agent and tenant scopes", id, ReservedUserPrefix)
	}
	return nil
}

// Scoped is a write request that takes a memory scope: append, add, item.save.
type Scoped interface {
	// Target returns the request's scope (empty: user), user id and agent id.
	Target() (scope MemoryScope, userID, agentID string)
	// Owned returns the request with its scope set to scope and user_id to
	// owner: the form the retriever records and applies, so the write lands
	// in the scope's memory.
	Owned(scope MemoryScope, owner string) any
}

// Target returns the request's scope, user id and agent id.
func (r AppendRequest) Target() (MemoryScope, string, string) { return r.Scope, r.UserID, r.AgentID }

// Owned returns the request of scope with user_id owner.
func (r AppendRequest) Owned(scope MemoryScope, owner string) any {
	r.Scope, r.UserID = scope, owner
	return r
}

// Target returns the request's scope, user id and agent id.
func (r AddRequest) Target() (MemoryScope, string, string) { return r.Scope, r.UserID, r.AgentID }

// Owned returns the request of scope with user_id owner.
func (r AddRequest) Owned(scope MemoryScope, owner string) any {
	r.Scope, r.UserID = scope, owner
	return r
}

// Target returns the request's scope, user id and agent id.
func (r ItemRequest) Target() (MemoryScope, string, string) { return r.Scope, r.UserID, r.AgentID }

// Owned returns the request of scope with user_id owner.
func (r ItemRequest) Owned(scope MemoryScope, owner string) any {
	r.Scope, r.UserID = scope, owner
	return r
}

// scopeEndpoints maps each shared scope's write (append, add, item.save) to
// the endpoint it is requested on: the endpoint, not a field, carries the
// right to write the scope, so that the NATS server's permissions enforce it
// (see AgentScopeEndpoints and AdminEndpoints).
var scopeEndpoints = map[MemoryScope]map[string]string{
	MemoryScopeAgent: {
		EndpointAppend: EndpointAgentAppend, EndpointAdd: EndpointAgentAdd, EndpointItemSave: EndpointAgentItemSave,
	},
	MemoryScopeTenant: {
		EndpointAppend: EndpointTenantAppend, EndpointAdd: EndpointTenantAdd, EndpointItemSave: EndpointTenantItemSave,
	},
}

// ScopedEndpoint is the endpoint a write of op (append, add, item.save) to
// scope is requested on: op itself for the user scope, its agent.* form for
// the agent scope (on the subject AgentRPCSubject builds), its tenant.* form
// for the tenant scope.
func ScopedEndpoint(op string, scope MemoryScope) string {
	if ep, ok := scopeEndpoints[scope][op]; ok {
		return ep
	}
	return op
}

// ScopeEndpointOp is the write an agent.* or tenant.* endpoint makes (append,
// add or item.save: the op its write event records) and the scope it writes;
// ok is false for any other endpoint.
func ScopeEndpointOp(endpoint string) (op string, scope MemoryScope, ok bool) {
	for scope, eps := range scopeEndpoints {
		for op, ep := range eps {
			if ep == endpoint {
				return op, scope, true
			}
		}
	}
	return "", "", false
}

// ValidateAgentID checks an agent id that has an agent scope: an id (so a
// subject token) short enough for its owner id to be one too.
func ValidateAgentID(agentID string) error {
	if err := ValidateID("agent_id", agentID); err != nil {
		return err
	}
	if len(agentID) > MaxAgentIDLength {
		return ruleError("agent_id", "is %d characters long; an agent scope's agent id has at most %d", len(agentID), MaxAgentIDLength)
	}
	return nil
}
