package lifecycle

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/policy"
)

// Policies resolves the policy of a session: the base policy overlaid with its
// namespace's policy_overrides.json, cached per session, so that a session
// keeps the policy it started with and an evolved or changed policy reaches new
// sessions only (SPEC B5). The retriever and ingest each hold one.
type Policies struct {
	base   policy.Policy
	docs   *docstore.Store
	cache  *lru.Cache[string, policy.Policy]
	logger *zap.Logger
}

// NewPolicies returns a resolver caching up to size sessions' policies.
func NewPolicies(base policy.Policy, docs *docstore.Store, size int, logger *zap.Logger) (*Policies, error) {
	if docs == nil {
		return nil, fmt.Errorf("%w: policies: no document store", ErrInvalidConfig)
	}
	cache, err := lru.New[string, policy.Policy](size)
	if err != nil {
		return nil, fmt.Errorf("%w: policies: cache size %d: %w", ErrInvalidConfig, size, err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Policies{base: base, docs: docs, cache: cache, logger: logger}, nil
}

// Base is the configured policy the overrides are overlaid on.
func (p *Policies) Base() policy.Policy { return p.base }

// For returns the policy of a session of ns; sessionID "" reads the overrides
// every time. An unreadable or invalid overrides file is logged and the base
// policy used (not cached, so the next call tries again): a bad proposal must
// not break what reads the policy.
func (p *Policies) For(ctx context.Context, ns docstore.Namespace, sessionID string) policy.Policy {
	key := ""
	if sessionID != "" {
		key = ns.Tenant + "." + ns.User + "." + sessionID
		if pol, ok := p.cache.Get(key); ok {
			return pol
		}
	}
	pol := p.base
	data, ok, err := p.docs.PolicyOverrides(ctx, ns)
	switch {
	case err != nil:
		p.logger.Warn("reading policy overrides; using the base policy", obs.Tenant(ns.Tenant), obs.User(ns.User), zap.Error(err))
		return pol
	case ok:
		overlaid, err := pol.Overlay(data)
		if err != nil {
			p.logger.Warn("invalid policy overrides; using the base policy", obs.Tenant(ns.Tenant), obs.User(ns.User), zap.Error(err))
		} else {
			pol = overlaid
		}
	}
	if key != "" {
		p.cache.ContainsOrAdd(key, pol) // the first policy of a session stays
	}
	return pol
}
