package retrieve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/lifecycle"
)

// Compressor compresses a namespace's MEMORY.md on demand (SPEC B4; the
// endpoint compress), passed in so that the retriever does not import the
// consolidator's code. A compression the loss guard refuses is a reply with
// Rejected set, not an error.
type Compressor interface {
	CompressNow(ctx context.Context, ns docstore.Namespace, dryRun bool) (events.CompressReply, error)
}

// backupsList answers backups.list (SPEC A8).
func (s *Service) backupsList(ctx context.Context, tenant string, req events.UserRequest) (events.BackupsReply, error) {
	names, err := s.deps.Docs.Backups(ctx, docstore.Namespace{Tenant: tenant, User: req.UserID})
	if names == nil {
		names = []string{}
	}
	return events.BackupsReply{Backups: names}, err
}

// backupsRestore answers backups.restore: the named backup, or the newest of
// MEMORY.md, goes back in place; the content it replaces is backed up first.
func (s *Service) backupsRestore(ctx context.Context, tenant string, req events.BackupRestoreRequest) (events.BackupRestoreReply, error) {
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	name := req.Backup
	if name == "" {
		names, err := s.deps.Docs.Backups(ctx, ns)
		if err != nil {
			return events.BackupRestoreReply{}, err
		}
		for _, n := range names {
			if strings.HasSuffix(n, "_"+docstore.MemoryFile) {
				name = n
			}
		}
		if name == "" {
			return events.BackupRestoreReply{}, fmt.Errorf("%w: %s has no backup of %s", ErrNotFound, req.UserID, docstore.MemoryFile)
		}
	}
	target, err := s.deps.Docs.BackupTarget(name)
	if err != nil {
		return events.BackupRestoreReply{}, err
	}
	if err := s.deps.Docs.Restore(ctx, ns, name); err != nil {
		if errors.Is(err, docstore.ErrNotFound) {
			return events.BackupRestoreReply{}, fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return events.BackupRestoreReply{}, err
	}
	return events.BackupRestoreReply{Restored: name, File: target}, nil
}

// compress answers compress (SPEC B4): now, whatever the size and the time of
// the last compression.
func (s *Service) compress(ctx context.Context, tenant string, req events.CompressRequest) (events.CompressReply, error) {
	if s.deps.Compressor == nil {
		return events.CompressReply{}, fmt.Errorf("%w: this retriever has no compressor", ErrUnavailable)
	}
	return s.deps.Compressor.CompressNow(ctx, docstore.Namespace{Tenant: tenant, User: req.UserID}, req.DryRun)
}

// policyShow answers policy.show (SPEC B1): the configured policy overlaid with
// the namespace's overrides, as a new session would get it.
func (s *Service) policyShow(ctx context.Context, tenant string, req events.UserRequest) (events.PolicyReply, error) {
	return s.policyReply(ctx, docstore.Namespace{Tenant: tenant, User: req.UserID}, "")
}

func (s *Service) policyReply(ctx context.Context, ns docstore.Namespace, snapshot string) (events.PolicyReply, error) {
	data, ok, err := s.deps.Docs.PolicyOverrides(ctx, ns)
	if err != nil {
		return events.PolicyReply{}, err
	}
	p, err := s.cfg.Policy.Overlay(data)
	if err != nil {
		return events.PolicyReply{}, err
	}
	pj, err := json.Marshal(p)
	if err != nil {
		return events.PolicyReply{}, err
	}
	reply := events.PolicyReply{Policy: pj, Snapshot: snapshot}
	if ok {
		reply.Overrides = json.RawMessage(bytes.TrimSpace(data))
	}
	return reply, nil
}

// policySet answers policy.set (SPEC B5): the values are merged into the
// current overrides and the result validated as a whole before anything is
// written; the current overrides are snapshotted first. Sessions already
// running keep the policy they started with.
func (s *Service) policySet(ctx context.Context, tenant string, req events.PolicySetRequest) (events.PolicyReply, error) {
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	snapshot, err := lifecycle.SetPolicy(ctx, s.deps.Docs, ns, s.cfg.Policy, req.Values)
	if err != nil {
		return events.PolicyReply{}, err
	}
	return s.policyReply(ctx, ns, snapshot)
}

// policyHistory answers policy.history: the snapshots, oldest first.
func (s *Service) policyHistory(ctx context.Context, tenant string, req events.UserRequest) (events.PolicyHistoryReply, error) {
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	names, err := s.deps.Docs.PolicySnapshots(ctx, ns)
	if err != nil {
		return events.PolicyHistoryReply{}, err
	}
	reply := events.PolicyHistoryReply{Snapshots: []events.PolicySnapshot{}}
	for _, name := range names {
		data, err := s.deps.Docs.ReadFile(ctx, ns, name)
		if errors.Is(err, docstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return events.PolicyHistoryReply{}, err
		}
		ts, _ := s.deps.Docs.SnapshotTime(name)
		reply.Snapshots = append(reply.Snapshots, events.PolicySnapshot{Name: name, TS: ts, Overrides: json.RawMessage(bytes.TrimSpace(data))})
	}
	return reply, nil
}

// policyRollback answers policy.rollback: the snapshot (the newest by default)
// becomes the overrides, after a snapshot of the overrides it replaces.
func (s *Service) policyRollback(ctx context.Context, tenant string, req events.PolicyRollbackRequest) (events.PolicyReply, error) {
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	name := req.Snapshot
	if name == "" {
		names, err := s.deps.Docs.PolicySnapshots(ctx, ns)
		if err != nil {
			return events.PolicyReply{}, err
		}
		if len(names) == 0 {
			return events.PolicyReply{}, fmt.Errorf("%w: %s has no policy snapshot", ErrNotFound, req.UserID)
		}
		name = names[len(names)-1]
	}
	data, err := s.deps.Docs.ReadFile(ctx, ns, docstore.InDir(docstore.PolicySnapshotsDir, name))
	if errors.Is(err, docstore.ErrNotFound) {
		return events.PolicyReply{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return events.PolicyReply{}, err
	}
	if _, err := s.cfg.Policy.Overlay(data); err != nil {
		return events.PolicyReply{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	snapshot, err := s.deps.Docs.RollbackPolicy(ctx, ns, name)
	if err != nil {
		return events.PolicyReply{}, err
	}
	return s.policyReply(ctx, ns, snapshot)
}
