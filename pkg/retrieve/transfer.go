package retrieve

import (
	"context"
	"fmt"

	"github.com/agentmem/agentmem/events"
)

// Transfer moves a tenant's memory out and in, page by page, and erases a user
// (agentmem export, import, forget); pkg/transfer implements it.
type Transfer interface {
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

func (s *Service) importPage(ctx context.Context, tenant string, req events.ImportRequest) (events.ImportReply, error) {
	t, err := s.transfer()
	if err != nil {
		return events.ImportReply{}, err
	}
	return t.Import(ctx, tenant, req)
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
