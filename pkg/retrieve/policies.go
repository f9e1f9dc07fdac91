package retrieve

import (
	"context"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/policy"
)

// policyFor returns the policy of a request: the base policy overlaid with the
// namespace's policy_overrides.json, cached per session. A request without a session
// reads the overrides every time. An unreadable or invalid overrides file is logged
// and the base policy used: a bad evolution proposal must not break retrieval.
func (s *Service) policyFor(ctx context.Context, ns docstore.Namespace, sessionID string) policy.Policy {
	key := ""
	if sessionID != "" {
		key = ns.Tenant + "." + ns.User + "." + sessionID
		if p, ok := s.policies.Get(key); ok {
			return p
		}
	}
	p := s.cfg.Policy
	data, ok, err := s.deps.Docs.PolicyOverrides(ctx, ns)
	switch {
	case err != nil:
		s.logger.Warn("reading policy overrides; using the base policy", obs.Tenant(ns.Tenant), obs.User(ns.User), zap.Error(err))
		return p // not cached: the next request tries again
	case ok:
		overlaid, err := p.Overlay(data)
		if err != nil {
			s.logger.Warn("invalid policy overrides; using the base policy", obs.Tenant(ns.Tenant), obs.User(ns.User), zap.Error(err))
		} else {
			p = overlaid
		}
	}
	if key != "" {
		s.policies.ContainsOrAdd(key, p) // the first policy of a session stays
	}
	return p
}
