package retrieve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/writes"
)

// namespaceLocks is the number of stripes of Service.writeLocks.
const namespaceLocks = 64

// writeOp adapts a request that changes memory to an endpoint: it is recorded
// as a write event and applied by pkg/writes (Service.record).
func writeOp[Req any](s *Service, op string) func(context.Context, string, Req) (any, error) {
	return func(ctx context.Context, tenant string, req Req) (any, error) {
		return s.record(ctx, tenant, op, req)
	}
}

// record publishes the write event of a validated request of op, then applies
// it with the shared applier and returns its reply: the stream holds every
// write before it is applied, so a replay or a rebuild reproduces it.
//
// The writes of one namespace are recorded and applied under one lock, so this
// replica applies them in stream order. A request identical to the user's
// previous write is taken for its retry: it is published under that write's
// Nats-Msg-Id, so inside the stream's duplicate window the stream reports a
// duplicate, and it is answered without being applied again (retried).
//
// A write that fails once recorded (an update of a memory that does not
// exist) fails the same way when a replay applies it again.
func (s *Service) record(ctx context.Context, tenant, op string, req any) (any, error) {
	env, err := writes.Record(tenant, op, req, s.deps.Now())
	if err != nil {
		return nil, err
	}
	unlock := s.lockNamespace(tenant, env.UserID)
	defer unlock()
	msg, err := eventstore.Msg(env)
	if err != nil {
		return nil, err
	}
	msgID, retry := writes.MsgID(env, 0), false
	switch last, err := s.deps.Events.Last(ctx, msg.Subject); {
	case err == nil:
		if prev, derr := events.Decode(last.Data); derr == nil && writes.SameRequest(prev, env) && last.Header.Get(events.HeaderMsgID) != "" {
			msgID, retry = last.Header.Get(events.HeaderMsgID), true
		} else {
			msgID = writes.MsgID(env, last.Sequence)
		}
	case !errors.Is(err, eventstore.ErrNotFound):
		return nil, fmt.Errorf("%w: record the %s write: %w", ErrUnavailable, op, err)
	}
	// The retry of a write the quota let through is answered as one, not
	// refused for the room the write itself took: it is refused only when the
	// tenant is over the quota already (a repeat outside the duplicate window
	// is applied again, and may pass the quota by itself once).
	grows := quotaOf(op, req)
	if err := s.withinQuota(ctx, tenant, grows, retry); err != nil {
		return nil, err
	}
	msg.Header.Set(events.HeaderMsgID, msgID)
	ack, err := s.deps.JS.PublishMsg(ctx, msg)
	if errors.Is(err, nats.ErrMaxPayload) {
		// The request fit max_payload but its event (the request and the
		// envelope around it) does not: an import page sent without the room
		// the agentmem client leaves.
		return nil, fmt.Errorf("%w: the %s request is too large to record as a write event (%d bytes, max_payload %d): send a smaller one", events.ErrInvalidRequest, op, len(msg.Data), s.deps.Conn.MaxPayload())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: record the %s write: %w", ErrUnavailable, op, err)
	}
	if ack.Duplicate {
		return s.retried(ctx, env, ack)
	}
	reply, err := s.writes.Apply(ctx, env)
	switch {
	case err != nil:
	case len(grows) > 0:
		for kind, n := range grows {
			s.deps.Quota.Added(tenant, kind, n)
		}
	case slices.Contains(shrinkingOps, op):
		s.deps.Quota.Recount(tenant)
	}
	return reply, err
}

// shrinkingOps are the writes that can leave a tenant holding less: its quota
// counts are read again after one, so that the room it made is seen at once.
var shrinkingOps = []string{events.EndpointDelete, events.EndpointReset, events.EndpointItemDelete,
	events.EndpointItemDeleteScope, events.EndpointCompress, events.EndpointBackupsRestore}

// quotaOf is what a write of op grows, by quota: memories for add, item.save
// (a tenant's too), import (its records) and session.restore (its items);
// Markdown bytes for append and import (its file chunks). Empty for the
// writes that do not grow either (updates, deletes: a tenant over its quota can
// always make room). An upsert counts as new, like item.save of a key that
// exists: the quota is checked before anything is read.
func quotaOf(op string, req any) map[quota.Kind]int {
	grows := map[quota.Kind]int{}
	switch r := req.(type) {
	case events.AppendRequest:
		grows[quota.MarkdownBytes] = len(r.Content)
	case events.AddRequest:
		grows[quota.Memories] = 1
	case events.ItemRequest:
		if op == events.EndpointItemSave {
			grows[quota.Memories] = 1
		}
	case events.ImportRequest:
		grows[quota.Memories] = len(r.Records)
		for _, f := range r.Files {
			grows[quota.MarkdownBytes] += len(f.Data)
		}
	case events.SessionArchive:
		grows[quota.Memories] = len(r.Items)
	}
	for kind, n := range grows {
		if n == 0 {
			delete(grows, kind)
		}
	}
	return grows
}

// withinQuota refuses a write that would take tenant over its quota of any
// kind it grows (an error wrapping quota.ErrExceeded: 429) before it is
// recorded; the retry of a write is refused only when the tenant is over
// already.
func (s *Service) withinQuota(ctx context.Context, tenant string, grows map[quota.Kind]int, retry bool) error {
	for _, kind := range []quota.Kind{quota.Memories, quota.MarkdownBytes} {
		n, ok := grows[kind]
		if !ok {
			continue
		}
		if retry {
			n = 0
		}
		err := s.deps.Quota.Check(ctx, tenant, kind, n)
		if errors.Is(err, quota.ErrExceeded) {
			return err
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// lockNamespace locks the stripe of tenant/user and returns its unlock.
func (s *Service) lockNamespace(tenant, user string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant + "." + user))
	mu := &s.writeLocks[h.Sum32()%namespaceLocks]
	mu.Lock()
	return mu.Unlock
}

// HoldWrites holds every write request of this replica until release is
// called: the ones being applied finish first, later ones wait. A backup holds
// them while it takes its snapshots, so that no write is on the stream but not
// yet in the stores it copies.
func (s *Service) HoldWrites() (release func()) {
	for i := range s.writeLocks {
		s.writeLocks[i].Lock()
	}
	return func() {
		for i := range s.writeLocks {
			s.writeLocks[i].Unlock()
		}
	}
}

// retried answers a write the stream already holds, without applying it again:
// with what the stores hold now (update, items, policy) or what the recorded
// write did (append's file, add's ids); a delete deleted nothing this time.
func (s *Service) retried(ctx context.Context, env events.Envelope, ack *jetstream.PubAck) (any, error) {
	req, err := env.Write.Decode()
	if err != nil {
		return nil, err
	}
	tenant, ns := env.Tenant, docstore.Namespace{Tenant: env.Tenant, User: env.UserID}
	switch r := req.(type) {
	case *events.AppendRequest:
		reply := events.AppendReply{File: docstore.MemoryFile, Slot: r.EffectiveSlot()}
		if reply.Slot == events.SlotToday {
			// The note of the day the first request was recorded on.
			orig, err := s.storedAt(ctx, ack)
			if err != nil {
				return nil, err
			}
			reply.File = markdown.DailyNoteName(orig.TS)
		}
		return reply, nil
	case *events.AddRequest:
		return events.AddReply{MemoryIDs: env.Write.MemoryIDs}, nil
	case *events.UpdateRequest:
		return s.deps.Memories.Get(ctx, tenant, events.GetRequest{UserID: r.UserID, ID: r.ID})
	case *events.ItemRequest:
		it := r.Item
		return s.deps.Memories.GetItem(ctx, tenant, events.ItemKeyRequest{UserID: r.UserID, Scope: it.Scope, Kind: it.Kind, Key: it.Key, SessionID: it.SessionID})
	case *events.ResetRequest:
		return events.ResetReply{}, nil
	case *events.SessionRequest:
		// session.clear: the session's events are gone from the stream again,
		// so clearing its state again is what a rebuild ends with too.
		return s.writes.Apply(ctx, env)
	case *events.SessionArchive:
		// Turns and items are upserts: the first restore stored them all.
		return events.SessionRestoreReply{SessionID: r.SessionID, Turns: len(r.Turns), Items: len(r.Items)}, nil
	case *events.BackupRestoreRequest:
		target, err := s.deps.Docs.BackupTarget(r.Backup)
		if r.Backup == "" || err != nil {
			target = docstore.MemoryFile
		}
		return events.BackupRestoreReply{Restored: r.Backup, File: target}, nil
	case *events.CompressRequest:
		return events.CompressReply{}, nil
	case *events.ImportRequest:
		// Every entry replaces what has its name, id or key: the first import wrote them.
		return events.ImportReply{Files: len(r.Files), Records: len(r.Records), Sessions: len(r.Sessions)}, nil
	case *events.PolicySetRequest, *events.PolicyRollbackRequest:
		return lifecycle.PolicyReply(ctx, s.deps.Docs, ns, s.cfg.Policy, "")
	}
	// delete, item.delete, item.delete_scope.
	return events.DeleteReply{}, nil
}

// storedAt reads back the event a duplicate publish was acknowledged with.
func (s *Service) storedAt(ctx context.Context, ack *jetstream.PubAck) (events.Envelope, error) {
	stream, err := s.deps.JS.Stream(ctx, ack.Stream)
	if err != nil {
		return events.Envelope{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	raw, err := stream.GetMsg(ctx, ack.Sequence)
	if err != nil {
		return events.Envelope{}, fmt.Errorf("%w: read the recorded write %d: %w", ErrUnavailable, ack.Sequence, err)
	}
	return events.Decode(raw.Data)
}

// ErrScopeEndpoint: a write of a memory scope requested on an endpoint that
// does not write that scope (scope agent or tenant on append, add or
// item.save, whose agent.* and tenant.* forms NATS permissions keep for the
// agent's own credential and admins; a scope on item.update).
var ErrScopeEndpoint = errors.New("retrieve: scope not written by this endpoint")

// ErrAgentMismatch: an agent-scope write whose agent_id is not the agent its
// subject names (memrpc.<tenant>.agent.<agent_id>.<op>).
var ErrAgentMismatch = errors.New("retrieve: agent_id is not the subject's agent")

// scopedWrite adapts a write that takes a memory scope (append, add,
// item.save, and their agent.* and tenant.* forms; item.update takes the user
// scope only): the request is recorded and applied with user_id set to the
// scope's owner id (events.ScopeOwner), so it lands in that scope's memory.
// A shared scope is written only on its own endpoints: the agent scope on
// memrpc.<tenant>.agent.<agent_id>.<op>, for the agent the subject names, the
// tenant scope on tenant.*. The subject, not a body field, carries the right
// to write there, so that the NATS server enforces it (an agent credential
// may publish its own agent's subjects only, an admin any).
func scopedWrite[Req events.Scoped](s *Service, endpoint string) func(context.Context, events.Subject, Req) (any, error) {
	op, only, shared := events.ScopeEndpointOp(endpoint)
	if !shared {
		op, only = endpoint, events.MemoryScopeUser
	}
	return func(ctx context.Context, sub events.Subject, req Req) (any, error) {
		scope, userID, agentID := req.Target()
		scope = scope.Effective()
		switch {
		case op == events.EndpointItemUpdate && scope != events.MemoryScopeUser:
			return nil, fmt.Errorf("%w: %w: %s changes the user scope only, not %s", events.ErrInvalidRequest, ErrScopeEndpoint, op, scope)
		case scope != only && shared:
			return nil, fmt.Errorf("%w: %w: %s writes scope %s only; the request's scope is %q", events.ErrInvalidRequest, ErrScopeEndpoint, endpoint, only, scope)
		case scope == events.MemoryScopeAgent && !shared:
			return nil, fmt.Errorf("%w: %w: scope agent is written on memrpc.<tenant>.agent.<agent_id>.%s, which takes that agent's credential or an admin's", events.ErrInvalidRequest, ErrScopeEndpoint, op)
		case scope == events.MemoryScopeTenant && !shared:
			return nil, fmt.Errorf("%w: %w: scope tenant is written through %s, which takes an admin credential", events.ErrInvalidRequest, ErrScopeEndpoint, events.ScopedEndpoint(op, scope))
		case scope == events.MemoryScopeAgent && agentID != sub.Agent:
			return nil, fmt.Errorf("%w: %w: agent_id %q, but the subject writes agent %q's scope", events.ErrInvalidRequest, ErrAgentMismatch, agentID, sub.Agent)
		}
		if scope == events.MemoryScopeUser {
			// Recorded as before scopes: the user's own memory.
			return s.record(ctx, sub.Tenant, op, req)
		}
		owner, err := events.ScopeOwner(scope, userID, agentID)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", events.ErrInvalidRequest, err)
		}
		return s.record(ctx, sub.Tenant, op, req.Owned(scope, owner))
	}
}

// reservedUser refuses a write of an agent endpoint whose user_id is an owner
// id of the agent or tenant scope (events.IsReservedUserID): an agent writes
// those only through a scope field, which scopedWrite checks, so that update
// or item.update on an agent credential cannot reach the tenant scope. The
// admin endpoints (delete, reset, forget, import, ...) may name an owner id:
// that is how an admin corrects, erases, exports and imports a shared scope;
// reads may too (the inspector browses the scopes that way).
func reservedUser(endpoint string, data []byte) error {
	if !events.IsWriteOp(endpoint) || slices.Contains(events.AdminEndpoints, endpoint) {
		return nil
	}
	var owner struct {
		UserID string `json:"user_id"`
	}
	if json.Unmarshal(data, &owner) != nil || !events.IsReservedUserID(owner.UserID) {
		return nil // a malformed request fails its own decoding next
	}
	return fmt.Errorf("user_id %q: ids starting with %q are reserved for the agent and tenant scopes; write those with the scope field", owner.UserID, events.ReservedUserPrefix)
}
