package events

import (
	"fmt"
	"strings"
)

// Subject prefixes. Events live under mem.> (the JetStream stream), retriever
// requests under memrpc.> (core NATS request/reply, never stored) and dead letters
// under memdlq.> (a stream of their own, so replaying mem.> never re-reads them).
const (
	EventPrefix = "mem"
	RPCPrefix   = "memrpc"
	DLQPrefix   = "memdlq"
)

// Stream and consumer filter subjects. The filters are the only wildcard subjects
// of the contract; no builder ever produces a wildcard from an ID.
const (
	StreamSubjects = "mem.>"    // the event stream
	DLQSubjects    = "memdlq.>" // the dead-letter stream

	FilterObservations = "mem.*.obs.*.*"
	FilterEnded        = "mem.*.ended.*.*"
	FilterHits         = "mem.*.hit.*"
	FilterWritten      = "mem.*.written.*"
	FilterConsolidate  = "mem.*.consolidate.*"
	FilterSummaryDue   = "mem.*.summary.*.*"
	FilterWrites       = "mem.*.write.*"
)

// Retriever endpoints: memrpc.<tenant>.<endpoint>. A dotted name is still one logical
// endpoint (memrpc.acme.session.summary).
const (
	EndpointContext         = "context"
	EndpointSearch          = "search"
	EndpointAppend          = "append"
	EndpointTopic           = "topic"
	EndpointAdd             = "add"
	EndpointGet             = "get"
	EndpointUpdate          = "update"
	EndpointDelete          = "delete"
	EndpointReset           = "reset"
	EndpointHistory         = "history"
	EndpointConsolidate     = "consolidate"
	EndpointSessionSummary  = "session.summary"
	EndpointSessionClear    = "session.clear"
	EndpointSessionArchive  = "session.archive"
	EndpointSessionRestore  = "session.restore"
	EndpointItemSave        = "item.save"
	EndpointItemGet         = "item.get"
	EndpointItemList        = "item.list"
	EndpointItemUpdate      = "item.update"
	EndpointItemDelete      = "item.delete"
	EndpointItemDeleteScope = "item.delete_scope"
	EndpointItemSearch      = "item.search"
	// The tenant scope's writes: append, add and item.save of scope tenant, on
	// endpoints of their own so that NATS permissions keep them admin-only.
	EndpointTenantAppend   = "tenant.append"
	EndpointTenantAdd      = "tenant.add"
	EndpointTenantItemSave = "tenant.item.save"
	// The agent scope's writes: append, add and item.save of scope agent,
	// requested on memrpc.<tenant>.agent.<agent_id>.<op> (AgentRPCSubject), so
	// that NATS permissions can bind a credential to one agent's scope.
	EndpointAgentAppend   = "agent.append"
	EndpointAgentAdd      = "agent.add"
	EndpointAgentItemSave = "agent.item.save"
)

// AgentScopeEndpoints are the endpoints whose subject carries an agent id
// (AgentRPCSubject) rather than being memrpc.<tenant>.<endpoint>; they are not
// in Endpoints. An agent credential bound to an agent may request them with
// its own agent id only, an admin credential with any.
var AgentScopeEndpoints = []string{EndpointAgentAppend, EndpointAgentAdd, EndpointAgentItemSave}

// agentRoute is the subject token after the tenant of the agent-scope writes,
// and the prefix of their endpoint names.
const agentRoute = "agent"

// Endpoints lists every retriever endpoint on memrpc.<tenant>.<endpoint>, in
// the order of the README (AgentScopeEndpoints are the others).
var Endpoints = []string{
	EndpointContext, EndpointSearch, EndpointAppend, EndpointTopic,
	EndpointAdd, EndpointGet, EndpointUpdate, EndpointDelete, EndpointReset, EndpointHistory, EndpointConsolidate,
	EndpointSessionSummary, EndpointSessionClear, EndpointSessionArchive, EndpointSessionRestore,
	EndpointItemSave, EndpointItemGet, EndpointItemList, EndpointItemUpdate, EndpointItemDelete, EndpointItemDeleteScope, EndpointItemSearch,
	EndpointTenantAppend, EndpointTenantAdd, EndpointTenantItemSave,
	EndpointBackupsList, EndpointBackupsRestore, EndpointCompress,
	EndpointPolicyShow, EndpointPolicySet, EndpointPolicyHistory, EndpointPolicyRollback,
	EndpointEventsList, EndpointEventsGet, EndpointEventsCount,
	EndpointExport, EndpointImport, EndpointForget,
	EndpointDLQList, EndpointDLQReplay,
}

// IsEndpoint reports whether name is one of Endpoints.
func IsEndpoint(name string) bool {
	return oneOf(name, Endpoints)
}

// SubjectKind says which of the contract's subject families a subject belongs to.
type SubjectKind string

// Subject kinds; the event kinds are the subject's third token.
const (
	SubjectObservation SubjectKind = "obs"
	SubjectEnded       SubjectKind = "ended"
	SubjectHit         SubjectKind = "hit"
	SubjectWritten     SubjectKind = "written"
	SubjectConsolidate SubjectKind = "consolidate"
	SubjectSummaryDue  SubjectKind = "summary"
	SubjectWrite       SubjectKind = "write"
	SubjectRPC         SubjectKind = "rpc"
	SubjectDLQ         SubjectKind = "dlq"
)

// Subject is a parsed subject. Only the fields of its Kind are set: Tenant, User and
// Session for observations and ended sessions; Tenant and User for hit, written, write and
// consolidate; Tenant and Endpoint for rpc, and Agent for the endpoints of
// AgentScopeEndpoints; Worker for dlq.
type Subject struct {
	Kind     SubjectKind
	Tenant   string
	User     string
	Session  string
	Endpoint string
	Agent    string
	Worker   string
}

// ObservationSubject is mem.<tenant>.obs.<user>.<session>.
func ObservationSubject(tenant, user, session string) (string, error) {
	return sessionSubject(SubjectObservation, tenant, user, session)
}

// EndedSubject is mem.<tenant>.ended.<user>.<session>.
func EndedSubject(tenant, user, session string) (string, error) {
	return sessionSubject(SubjectEnded, tenant, user, session)
}

// SummaryDueSubject is mem.<tenant>.summary.<user>.<session>.
func SummaryDueSubject(tenant, user, session string) (string, error) {
	return sessionSubject(SubjectSummaryDue, tenant, user, session)
}

// HitSubject is mem.<tenant>.hit.<user>.
func HitSubject(tenant, user string) (string, error) {
	return userSubject(SubjectHit, tenant, user)
}

// WrittenSubject is mem.<tenant>.written.<user>.
func WrittenSubject(tenant, user string) (string, error) {
	return userSubject(SubjectWritten, tenant, user)
}

// ConsolidateSubject is mem.<tenant>.consolidate.<user>.
func ConsolidateSubject(tenant, user string) (string, error) {
	return userSubject(SubjectConsolidate, tenant, user)
}

// WriteSubject is mem.<tenant>.write.<user>: the user is the fourth token, as
// on every per-user subject, so the user's writes are selected (and purged) by
// subject.
func WriteSubject(tenant, user string) (string, error) {
	return userSubject(SubjectWrite, tenant, user)
}

// RPCSubject is memrpc.<tenant>.<endpoint>; endpoint must be one of Endpoints.
func RPCSubject(tenant, endpoint string) (string, error) {
	if err := ValidateID("tenant", tenant); err != nil {
		return "", wrap(ErrInvalidSubject, err)
	}
	if !IsEndpoint(endpoint) {
		return "", wrap(ErrInvalidSubject, ruleError("endpoint", "is %q, which is not a retriever endpoint (see events.Endpoints)", endpoint))
	}
	return RPCPrefix + "." + tenant + "." + endpoint, nil
}

// AgentRPCSubject is memrpc.<tenant>.agent.<agent_id>.<op>, the subject of
// endpoint, one of AgentScopeEndpoints (agent.append is requested on
// memrpc.<tenant>.agent.<agent_id>.append). The agent id is checked as
// ValidateAgentID does: one subject token, never a wildcard.
func AgentRPCSubject(tenant, agentID, endpoint string) (string, error) {
	if !oneOf(endpoint, AgentScopeEndpoints) {
		return "", wrap(ErrInvalidSubject, ruleError("endpoint", "is %q, which is not an agent-scope endpoint (see events.AgentScopeEndpoints)", endpoint))
	}
	if err := firstError(ValidateID("tenant", tenant), ValidateAgentID(agentID)); err != nil {
		return "", wrap(ErrInvalidSubject, err)
	}
	return RPCPrefix + "." + tenant + "." + agentRoute + "." + agentID + "." + strings.TrimPrefix(endpoint, agentRoute+"."), nil
}

// RequestSubject is the subject of a request to endpoint: AgentRPCSubject
// with agentID for AgentScopeEndpoints, RPCSubject (agentID unused) for the
// others.
func RequestSubject(tenant, agentID, endpoint string) (string, error) {
	if oneOf(endpoint, AgentScopeEndpoints) {
		return AgentRPCSubject(tenant, agentID, endpoint)
	}
	return RPCSubject(tenant, endpoint)
}

// RPCServiceSubject is memrpc.*.<endpoint> (memrpc.*.agent.*.<op> for
// AgentScopeEndpoints): what a retriever serving every tenant listens on; the
// tenant (and agent) is then read from the request subject with ParseSubject.
func RPCServiceSubject(endpoint string) (string, error) {
	if oneOf(endpoint, AgentScopeEndpoints) {
		return RPCPrefix + ".*." + agentRoute + ".*." + strings.TrimPrefix(endpoint, agentRoute+"."), nil
	}
	if !IsEndpoint(endpoint) {
		return "", wrap(ErrInvalidSubject, ruleError("endpoint", "is %q, which is not a retriever endpoint (see events.Endpoints)", endpoint))
	}
	return RPCPrefix + ".*." + endpoint, nil
}

// DLQSubject is memdlq.<worker>.
func DLQSubject(worker string) (string, error) {
	if err := ValidateID("worker", worker); err != nil {
		return "", wrap(ErrInvalidSubject, err)
	}
	return DLQPrefix + "." + worker, nil
}

func sessionSubject(kind SubjectKind, tenant, user, session string) (string, error) {
	if err := validateIDs("tenant", tenant, "user", user, "session", session); err != nil {
		return "", wrap(ErrInvalidSubject, err)
	}
	return EventPrefix + "." + tenant + "." + string(kind) + "." + user + "." + session, nil
}

func userSubject(kind SubjectKind, tenant, user string) (string, error) {
	if err := validateIDs("tenant", tenant, "user", user); err != nil {
		return "", wrap(ErrInvalidSubject, err)
	}
	return EventPrefix + "." + tenant + "." + string(kind) + "." + user, nil
}

// validateIDs checks (field, id) pairs in order and returns the first failure.
func validateIDs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := ValidateID(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// ParseSubject parses any concrete subject of the contract. Wildcards, unknown
// families, unknown endpoints, wrong token counts and invalid IDs are errors wrapping
// ErrInvalidSubject.
func ParseSubject(s string) (Subject, error) {
	sub, err := splitSubject(s)
	if err != nil {
		return Subject{}, fmt.Errorf("%w: %q %w", ErrInvalidSubject, s, err)
	}
	// Format validates every token with the same rules the builders use.
	if _, err := sub.Format(); err != nil {
		return Subject{}, fmt.Errorf("%q: %w", s, err)
	}
	return sub, nil
}

// splitSubject assigns the tokens of s to the fields of its family without
// validating the IDs.
func splitSubject(s string) (Subject, error) {
	tokens := strings.Split(s, ".")
	switch tokens[0] {
	case EventPrefix:
		if len(tokens) < 4 {
			return Subject{}, fmt.Errorf("has %d tokens; an event subject is mem.<tenant>.<kind>.<user>[.<session>]", len(tokens))
		}
		sub := Subject{Kind: SubjectKind(tokens[2]), Tenant: tokens[1], User: tokens[3]}
		want := 4
		switch sub.Kind {
		case SubjectObservation, SubjectEnded, SubjectSummaryDue:
			want = 5
		case SubjectHit, SubjectWritten, SubjectConsolidate, SubjectWrite:
		default:
			return Subject{}, fmt.Errorf("has event kind %q; known kinds are obs, ended, summary, hit, written, consolidate, write", tokens[2])
		}
		if len(tokens) != want {
			return Subject{}, fmt.Errorf("has %d tokens; %s subjects have %d", len(tokens), sub.Kind, want)
		}
		if want == 5 {
			sub.Session = tokens[4]
		}
		return sub, nil
	case RPCPrefix:
		if len(tokens) < 3 {
			return Subject{}, fmt.Errorf("has %d tokens; a request subject is memrpc.<tenant>.<endpoint>", len(tokens))
		}
		if tokens[2] == agentRoute {
			if len(tokens) < 5 {
				return Subject{}, fmt.Errorf("has %d tokens; an agent-scope write is memrpc.<tenant>.agent.<agent_id>.<op>", len(tokens))
			}
			return Subject{Kind: SubjectRPC, Tenant: tokens[1], Agent: tokens[3], Endpoint: agentRoute + "." + strings.Join(tokens[4:], ".")}, nil
		}
		return Subject{Kind: SubjectRPC, Tenant: tokens[1], Endpoint: strings.Join(tokens[2:], ".")}, nil
	case DLQPrefix:
		if len(tokens) != 2 {
			return Subject{}, fmt.Errorf("has %d tokens; a dead-letter subject is memdlq.<worker>", len(tokens))
		}
		return Subject{Kind: SubjectDLQ, Worker: tokens[1]}, nil
	default:
		return Subject{}, fmt.Errorf("does not start with %s, %s or %s", EventPrefix, RPCPrefix, DLQPrefix)
	}
}

// Format builds the subject string back from its parts; ParseSubject(s).Format()
// returns s for every valid s.
func (s Subject) Format() (string, error) {
	switch s.Kind {
	case SubjectObservation:
		return ObservationSubject(s.Tenant, s.User, s.Session)
	case SubjectEnded:
		return EndedSubject(s.Tenant, s.User, s.Session)
	case SubjectHit:
		return HitSubject(s.Tenant, s.User)
	case SubjectWritten:
		return WrittenSubject(s.Tenant, s.User)
	case SubjectConsolidate:
		return ConsolidateSubject(s.Tenant, s.User)
	case SubjectSummaryDue:
		return SummaryDueSubject(s.Tenant, s.User, s.Session)
	case SubjectWrite:
		return WriteSubject(s.Tenant, s.User)
	case SubjectRPC:
		if s.Agent != "" {
			return AgentRPCSubject(s.Tenant, s.Agent, s.Endpoint)
		}
		return RPCSubject(s.Tenant, s.Endpoint)
	case SubjectDLQ:
		return DLQSubject(s.Worker)
	default:
		return "", wrap(ErrInvalidSubject, ruleError("kind", "is %q, which is not a subject kind", s.Kind))
	}
}
