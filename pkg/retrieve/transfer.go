package retrieve

import (
	"context"
	"fmt"

	"github.com/agentmem/agentmem/events"
)

// Transfer moves a tenant's memory out and in, page by page, and erases a user
// (agentmem export, import, forget); pkg/transfer implements it.
type Transfer interface {
	// EmbedderInfo names this deployment's embedder, the one an import page's
	// vectors are of unless it is re-embedded.
	EmbedderInfo() events.EmbedderInfo
	Export(ctx context.Context, tenant string, req events.ExportRequest) (events.ExportReply, error)
	Import(ctx context.Context, tenant string, req events.ImportRequest) (events.ImportReply, error)
	Forget(ctx context.Context, tenant string, req events.ForgetRequest) (events.ForgetReply, error)
}

func (s *Service) transfer() (Transfer, error) {
	if s.deps.Transfer == nil {
		return nil, fmt.Errorf("%w: this retriever serves no export, import or forget", ErrUnavailable)
	}
	return s.deps.Transfer, nil
}

func (s *Service) export(ctx context.Context, tenant string, req events.ExportRequest) (events.ExportReply, error) {
	t, err := s.transfer()
	if err != nil {
		return events.ExportReply{}, err
	}
	return t.Export(ctx, tenant, req)
}

// importPage records the page as a write event and applies it (through
// Transfer.Import), so that a rebuild brings the import back. The event names
// the embedder of the page's vectors: a rebuild on another one embeds them again.
func (s *Service) importPage(ctx context.Context, tenant string, req events.ImportRequest) (any, error) {
	t, err := s.transfer()
	if err != nil {
		return nil, err
	}
	if !req.Reembed && len(req.Records) > 0 && req.Embedder == nil {
		info := t.EmbedderInfo()
		req.Embedder = &info
	}
	return s.record(ctx, tenant, events.EndpointImport, req)
}

// forget erases the user; the retriever's own caches need nothing: a cached
// file is checked against the store on every read.
func (s *Service) forget(ctx context.Context, tenant string, req events.ForgetRequest) (events.ForgetReply, error) {
	t, err := s.transfer()
	if err != nil {
		return events.ForgetReply{}, err
	}
	return t.Forget(ctx, tenant, req)
}
