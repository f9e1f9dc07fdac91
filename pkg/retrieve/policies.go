package retrieve

import (
	"context"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/policy"
)

// policyFor returns the policy of a request: the base policy overlaid with the
// namespace's policy_overrides.json, cached per session (lifecycle.Policies). A
// request without a session reads the overrides every time.
func (s *Service) policyFor(ctx context.Context, ns docstore.Namespace, sessionID string) policy.Policy {
	return s.policies.For(ctx, ns, sessionID)
}
