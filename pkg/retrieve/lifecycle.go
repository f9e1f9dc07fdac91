package retrieve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// compress answers compress (SPEC B4): now, whatever the size and the time of
// the last compression. A dry run changes nothing, so only the others are
// recorded as writes.
func (s *Service) compress(ctx context.Context, tenant string, req events.CompressRequest) (any, error) {
	if s.deps.Compressor == nil {
		return nil, fmt.Errorf("%w: this retriever has no compressor", ErrUnavailable)
	}
	if req.DryRun {
		return s.deps.Compressor.CompressNow(ctx, docstore.Namespace{Tenant: tenant, User: req.UserID}, true)
	}
	return s.record(ctx, tenant, events.EndpointCompress, req)
}

// policyShow answers policy.show (SPEC B1): the configured policy overlaid with
// the namespace's overrides, as a new session would get it.
func (s *Service) policyShow(ctx context.Context, tenant string, req events.UserRequest) (events.PolicyReply, error) {
	return lifecycle.PolicyReply(ctx, s.deps.Docs, docstore.Namespace{Tenant: tenant, User: req.UserID}, s.cfg.Policy, "")
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
