package app

import (
	"context"
	"errors"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// quotaRate is the process's events_per_second buckets (quotas.*), shared by
// its ingest worker; nil when no tenant has that quota.
func (rt *Runtime) quotaRate() *quota.Rate {
	if rt.rate == nil {
		rt.rate = quota.NewRate(rt.Config.Quotas.Quota())
	}
	return rt.rate
}

// quotaMeter is the process's memories and markdown_bytes meter, shared by
// every write path of the process (ingest, the extractor, the retriever's
// writes); nil when no tenant has either quota.
func (rt *Runtime) quotaMeter() (*quota.Meter, error) {
	if rt.meter == nil {
		m, err := quota.NewMeter(rt.Config.Quotas.Quota(), rt.tenantMemories, rt.tenantMarkdownBytes, 0)
		if err != nil {
			return nil, err
		}
		rt.meter = m
	}
	return rt.meter, nil
}

// tenantMemories counts the records of every user of tenant, expired ones
// included: they take room until the sweep removes them.
func (rt *Runtime) tenantMemories(ctx context.Context, tenant string) (int, error) {
	users, err := rt.Vectors.Users(ctx, tenant)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, u := range users {
		n, err := rt.Vectors.Count(ctx, vectorstore.Filter{Tenant: tenant, UserID: u, IncludeExpired: true})
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// tenantMarkdownBytes adds up the files of every user of tenant (MEMORY.md,
// daily notes, backups, policy files).
func (rt *Runtime) tenantMarkdownBytes(ctx context.Context, tenant string) (int, error) {
	users, err := rt.Docs.Users(ctx, tenant)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, u := range users {
		ns := docstore.Namespace{Tenant: tenant, User: u}
		names, err := rt.Docs.Files(ctx, ns)
		if err != nil {
			return 0, err
		}
		for _, name := range names {
			data, err := rt.Docs.ReadFile(ctx, ns, name)
			if errors.Is(err, docstore.ErrNotFound) {
				continue // deleted since the listing
			}
			if err != nil {
				return 0, err
			}
			total += len(data)
		}
	}
	return total, nil
}
