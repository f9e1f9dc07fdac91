package retrieve

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/policy"
)

// policyCache holds the effective policy of recent sessions. A session keeps the
// policy it started with (SPEC B5: a change of policy_overrides.json applies to new
// sessions), and the hot path reads the overrides once per session, not per request.
// It is bounded; the oldest entries are evicted first.
type policyCache struct {
	mu    sync.Mutex
	max   int
	byKey map[string]policy.Policy
	order []string // insertion order, for eviction
}

func newPolicyCache(max int) *policyCache {
	return &policyCache{max: max, byKey: make(map[string]policy.Policy)}
}

func (c *policyCache) get(key string) (policy.Policy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.byKey[key]
	return p, ok
}

func (c *policyCache) put(key string, p policy.Policy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	for len(c.order) >= c.max {
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
	c.byKey[key] = p
	c.order = append(c.order, key)
}

// policyFor returns the policy of a request: the base policy overlaid with the
// namespace's policy_overrides.json, cached per session. A request without a session
// reads the overrides every time. An unreadable or invalid overrides file is logged
// and the base policy used: a bad evolution proposal must not break retrieval.
func (s *Service) policyFor(ctx context.Context, ns docstore.Namespace, sessionID string) policy.Policy {
	key := ""
	if sessionID != "" {
		key = ns.Tenant + "." + ns.User + "." + sessionID
		if p, ok := s.policies.get(key); ok {
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
		s.policies.put(key, p)
	}
	return p
}
