// Package writes records and applies the requests to the retriever that change
// memory (events.WriteOps) as write events (mem.<tenant>.write.<user>). One
// Applier applies them: the retriever live, right after recording a request, and
// replay and rebuild when they go through the stream again; so there is one copy
// of the write logic, and a namespace that used append, add or items is
// reproduced from its stream.
//
// An event is applied with its envelope's ts as the current time (pkg/clock),
// so the daily note, the MEMORY.md heading, record and item times and snapshot
// and backup names are the same live, in a replay and on another machine. What
// is assigned from the input alone (the id of an added memory, an item's id) is
// recorded in the event and checked when it is applied.
package writes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/clock"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/redact"
	"github.com/agentmem/agentmem/pkg/session"
)

// Sentinel errors; returned errors wrap them.
var (
	// ErrInvalid: the event is not a write this build can apply (it never will be).
	ErrInvalid = errors.New("writes: invalid write event")
	// ErrNotFound: what the write names (a backup, a policy snapshot) does not exist.
	ErrNotFound = errors.New("writes: not found")
	// ErrUnavailable: the applier has no compressor for a compress write, or no
	// importer for an import write.
	ErrUnavailable = errors.New("writes: unavailable")
)

// Memories are the memory service's writes; *memory.Service implements them.
type Memories interface {
	Add(ctx context.Context, tenant string, req events.AddRequest) (events.AddReply, error)
	Update(ctx context.Context, tenant string, req events.UpdateRequest) (events.Memory, error)
	Delete(ctx context.Context, tenant string, req events.DeleteRequest) (events.DeleteReply, error)
	Reset(ctx context.Context, tenant string, req events.ResetRequest) (events.ResetReply, error)
	SaveItem(ctx context.Context, tenant, userID string, it events.MemoryItem) (events.MemoryItem, error)
	UpdateItem(ctx context.Context, tenant string, req events.ItemRequest) (events.MemoryItem, error)
	DeleteItem(ctx context.Context, tenant string, req events.ItemKeyRequest) (events.DeleteReply, error)
	DeleteScope(ctx context.Context, tenant string, req events.ItemScopeRequest) (events.DeleteReply, error)
}

// Consolidator consolidates one user's memory now (*consolidate.Runner).
type Consolidator interface {
	Consolidate(ctx context.Context, tenant, userID string) (events.ConsolidateReply, error)
}

// Compressor compresses a namespace's MEMORY.md now (*lifecycle.Compactor).
type Compressor interface {
	CompressNow(ctx context.Context, ns docstore.Namespace, dryRun bool) (events.CompressReply, error)
}

// Importer writes an import page into the stores (*transfer.Service): file
// chunks, records and session values replace what has their name, id or key, so
// applying a page twice gives the same memory. It embeds the records again
// when their vectors are of another embedder than the store's.
type Importer interface {
	Import(ctx context.Context, tenant string, req events.ImportRequest) (events.ImportReply, error)
}

// Deps are the stores an Applier writes to.
type Deps struct {
	Docs     *docstore.Store
	Sessions *session.Store
	Memories Memories
	// Compressor applies compress writes; nil makes them ErrUnavailable.
	Compressor Compressor
	// Consolidator applies consolidate writes; nil makes them ErrUnavailable.
	Consolidator Consolidator
	// Importer applies import writes; nil makes them ErrUnavailable.
	Importer Importer
	// Policy is the configured policy the overrides of policy writes are
	// validated over.
	Policy policy.Policy
}

// Applier applies write events to its Deps' stores.
type Applier struct{ d Deps }

// New returns an Applier over deps.
func New(deps Deps) (*Applier, error) {
	if deps.Docs == nil || deps.Sessions == nil || deps.Memories == nil {
		return nil, errors.New("writes: Deps.Docs, Sessions and Memories are required")
	}
	return &Applier{d: deps}, nil
}

// Record builds the write event of a validated request req (a value of the type
// events.WriteRequest(op) points to) of tenant at ts.
func Record(tenant, op string, req any, ts time.Time) (events.Envelope, error) {
	if r, ok := req.(events.SessionArchive); ok {
		// The archive's events are re-published on their own subjects; the write
		// keeps what is applied (turns and items).
		r.Events = nil
		req = r
	}
	data, err := json.Marshal(req)
	if err != nil {
		return events.Envelope{}, fmt.Errorf("writes: encode the %s request: %w", op, err)
	}
	var owner struct {
		UserID string `json:"user_id"`
	}
	if err := json.Unmarshal(data, &owner); err != nil {
		return events.Envelope{}, fmt.Errorf("writes: %w", err)
	}
	w := &events.Write{Op: op, Request: data}
	if a, ok := req.(events.AddRequest); ok {
		id, err := memory.AddedID(tenant, a)
		if err != nil {
			return events.Envelope{}, err
		}
		w.MemoryIDs = []string{id}
	}
	env := events.Envelope{
		ID: ulid.MustNew(ulid.Timestamp(ts), ulid.DefaultEntropy()).String(), Type: events.TypeWrite,
		SchemaVersion: events.SchemaVersion, TS: ts.UTC(), Tenant: tenant, UserID: owner.UserID, Write: w,
	}
	if err := env.Validate(); err != nil {
		return events.Envelope{}, err
	}
	return env, nil
}

// MsgID is the Nats-Msg-Id to publish the write event env with when the
// user's previous write event is stream sequence after (0: none): derived from
// the tenant, the op, the request and after, so that the same request twice in
// a row is stored once (a retry), while the same request again after another
// write (reset, add, reset) is a write of its own.
func MsgID(env events.Envelope, after uint64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d", env.Tenant, env.Write.Op, env.Write.Request, after))
	return "write-" + hex.EncodeToString(sum[:16])
}

// SameRequest reports whether a and b are write events of the same op and
// request. Two consolidations never are: what one does depends on what arrived
// since the last, not on its request, so a second one is not taken for a retry.
func SameRequest(a, b events.Envelope) bool {
	return a.Write != nil && b.Write != nil && a.Write.Op == b.Write.Op && a.Write.Op != events.EndpointConsolidate &&
		bytes.Equal(a.Write.Request, b.Write.Request)
}

// Apply applies the write event env with env.TS as the current time and returns
// the endpoint's reply. An event that is not a valid write is ErrInvalid.
//
// Applying is not idempotent for every op (append adds a block again, update
// notes another update), so callers apply each event once: the retriever skips a
// publish the stream reports as a duplicate, replay and rebuild skip an event id
// they have applied.
func (a *Applier) Apply(ctx context.Context, env events.Envelope) (any, error) {
	if env.Type != events.TypeWrite || env.Write == nil {
		return nil, fmt.Errorf("%w: event %s is a %s event", ErrInvalid, env.ID, env.Type)
	}
	req, err := env.Write.Decode()
	if err != nil {
		return nil, fmt.Errorf("%w: event %s: %w", ErrInvalid, env.ID, err)
	}
	ctx = clock.At(ctx, env.TS)
	tenant := env.Tenant
	ns := docstore.Namespace{Tenant: tenant, User: env.UserID}
	m := a.d.Memories
	switch env.Write.Op {
	case events.EndpointAppend:
		return a.appendMemory(ctx, ns, *req.(*events.AppendRequest))
	case events.EndpointAdd:
		reply, err := m.Add(ctx, tenant, *req.(*events.AddRequest))
		if err == nil && len(env.Write.MemoryIDs) > 0 && !slices.Equal(reply.MemoryIDs, env.Write.MemoryIDs) {
			err = fmt.Errorf("%w: event %s recorded memory ids %v, the add made %v", ErrInvalid, env.ID, env.Write.MemoryIDs, reply.MemoryIDs)
		}
		return reply, err
	case events.EndpointUpdate:
		return m.Update(ctx, tenant, *req.(*events.UpdateRequest))
	case events.EndpointDelete:
		return m.Delete(ctx, tenant, *req.(*events.DeleteRequest))
	case events.EndpointReset:
		return m.Reset(ctx, tenant, *req.(*events.ResetRequest))
	case events.EndpointItemSave:
		r := req.(*events.ItemRequest)
		return m.SaveItem(ctx, tenant, r.UserID, r.Item)
	case events.EndpointItemUpdate:
		return m.UpdateItem(ctx, tenant, *req.(*events.ItemRequest))
	case events.EndpointItemDelete:
		return m.DeleteItem(ctx, tenant, *req.(*events.ItemKeyRequest))
	case events.EndpointItemDeleteScope:
		return m.DeleteScope(ctx, tenant, *req.(*events.ItemScopeRequest))
	case events.EndpointSessionClear:
		return a.sessionClear(ctx, tenant, *req.(*events.SessionRequest))
	case events.EndpointSessionRestore:
		return a.sessionRestore(ctx, tenant, *req.(*events.SessionArchive))
	case events.EndpointBackupsRestore:
		return a.backupsRestore(ctx, ns, *req.(*events.BackupRestoreRequest))
	case events.EndpointCompress:
		if a.d.Compressor == nil {
			return nil, fmt.Errorf("%w: no compressor to apply compress", ErrUnavailable)
		}
		return a.d.Compressor.CompressNow(ctx, ns, req.(*events.CompressRequest).DryRun)
	case events.EndpointPolicySet:
		snapshot, err := lifecycle.SetPolicy(ctx, a.d.Docs, ns, a.d.Policy, req.(*events.PolicySetRequest).Values)
		if err != nil {
			return nil, err
		}
		return lifecycle.PolicyReply(ctx, a.d.Docs, ns, a.d.Policy, snapshot)
	case events.EndpointPolicyRollback:
		return a.policyRollback(ctx, ns, *req.(*events.PolicyRollbackRequest))
	case events.EndpointImport:
		if a.d.Importer == nil {
			return nil, fmt.Errorf("%w: no importer to apply import", ErrUnavailable)
		}
		return a.d.Importer.Import(ctx, tenant, *req.(*events.ImportRequest))
	case events.EndpointConsolidate:
		if a.d.Consolidator == nil {
			return nil, fmt.Errorf("%w: no consolidator to apply consolidate", ErrUnavailable)
		}
		return a.d.Consolidator.Consolidate(ctx, tenant, env.UserID)
	}
	// Decode accepted the op, so it is one of events.WriteOps: a missing case is a bug.
	return nil, fmt.Errorf("%w: op %s has no applier", ErrInvalid, env.Write.Op)
}

// appendMemory is memory_append (SPEC A9).
func (a *Applier) appendMemory(ctx context.Context, ns docstore.Namespace, req events.AppendRequest) (events.AppendReply, error) {
	// A credential in an appended entry is kept as a marker, as in every other
	// memory (pkg/redact); the entry is the caller's own, so its instructions stay.
	req.Content, _ = redact.Text(req.Content)
	slot := req.EffectiveSlot()
	if slot == events.SlotToday {
		name, err := a.d.Docs.AppendToday(ctx, ns, req.Content)
		return events.AppendReply{File: name, Slot: slot}, err
	}
	return events.AppendReply{File: docstore.MemoryFile, Slot: slot}, a.d.Docs.AppendLongTerm(ctx, ns, req.Content)
}

// sessionClear is the derived part of session.clear: the session's state and
// turns and its session-scoped items (the retriever deletes its events from the
// stream). Deleted counts the turns and items.
func (a *Applier) sessionClear(ctx context.Context, tenant string, req events.SessionRequest) (events.DeleteReply, error) {
	key := tenant + "." + req.UserID + "." + req.SessionID
	turns, err := a.d.Sessions.CountTurns(ctx, key)
	if err != nil {
		return events.DeleteReply{}, err
	}
	if err := a.d.Sessions.Delete(ctx, tenant, req.UserID, req.SessionID); err != nil {
		return events.DeleteReply{}, err
	}
	items, err := a.d.Memories.DeleteScope(ctx, tenant, events.ItemScopeRequest{UserID: req.UserID, Scope: events.ScopeSession, SessionID: req.SessionID})
	if err != nil {
		return events.DeleteReply{}, err
	}
	return events.DeleteReply{Deleted: turns + items.Deleted}, nil
}

// sessionRestore is the derived part of session.restore: turns and items are
// upserts by key (the retriever re-publishes the events).
func (a *Applier) sessionRestore(ctx context.Context, tenant string, arch events.SessionArchive) (events.SessionRestoreReply, error) {
	reply := events.SessionRestoreReply{SessionID: arch.SessionID}
	for _, t := range arch.Turns {
		if err := a.d.Sessions.SaveTurn(ctx, t); err != nil {
			return reply, err
		}
		reply.Turns++
	}
	for _, it := range arch.Items {
		if _, err := a.d.Memories.SaveItem(ctx, tenant, arch.UserID, it); err != nil {
			return reply, err
		}
		reply.Items++
	}
	return reply, nil
}

// backupsRestore puts the named backup, or the newest of MEMORY.md, back in
// place; the content it replaces is backed up first.
func (a *Applier) backupsRestore(ctx context.Context, ns docstore.Namespace, req events.BackupRestoreRequest) (events.BackupRestoreReply, error) {
	name := req.Backup
	if name == "" {
		names, err := a.d.Docs.Backups(ctx, ns)
		if err != nil {
			return events.BackupRestoreReply{}, err
		}
		for _, n := range names {
			if strings.HasSuffix(n, "_"+docstore.MemoryFile) {
				name = n
			}
		}
		if name == "" {
			return events.BackupRestoreReply{}, fmt.Errorf("%w: %s has no backup of %s", ErrNotFound, ns.User, docstore.MemoryFile)
		}
	}
	target, err := a.d.Docs.BackupTarget(name)
	if err != nil {
		return events.BackupRestoreReply{}, err
	}
	if err := a.d.Docs.Restore(ctx, ns, name); err != nil {
		return events.BackupRestoreReply{}, err
	}
	return events.BackupRestoreReply{Restored: name, File: target}, nil
}

// policyRollback makes the snapshot (the newest by default) the overrides,
// after a snapshot of the overrides it replaces.
func (a *Applier) policyRollback(ctx context.Context, ns docstore.Namespace, req events.PolicyRollbackRequest) (events.PolicyReply, error) {
	name := req.Snapshot
	if name == "" {
		names, err := a.d.Docs.PolicySnapshots(ctx, ns)
		if err != nil {
			return events.PolicyReply{}, err
		}
		if len(names) == 0 {
			return events.PolicyReply{}, fmt.Errorf("%w: %s has no policy snapshot", ErrNotFound, ns.User)
		}
		name = names[len(names)-1]
	}
	data, err := a.d.Docs.ReadFile(ctx, ns, docstore.InDir(docstore.PolicySnapshotsDir, name))
	if err != nil {
		return events.PolicyReply{}, err
	}
	if _, err := a.d.Policy.Overlay(data); err != nil {
		return events.PolicyReply{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	snapshot, err := a.d.Docs.RollbackPolicy(ctx, ns, name)
	if err != nil {
		return events.PolicyReply{}, err
	}
	return lifecycle.PolicyReply(ctx, a.d.Docs, ns, a.d.Policy, snapshot)
}
