package retrieve

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
)

// The agent's and the tenant's entries are taken right after the user's memory
// items, each within its share of the budget: with ranked user memories that
// would fill the whole budget, the first shared entries are still in the pack,
// each scope's section stays within its share, and the user's memory gets the
// rest.
func TestRenderGivesEachScopeItsShare(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		budget := rapid.IntRange(400, 2000).Draw(t, "budget")
		sh := shares{agent: rapid.IntRange(5, 40).Draw(t, "agent percent"), tenant: rapid.IntRange(5, 40).Draw(t, "tenant percent")}
		long := strings.Repeat("y", 160) // 40 tokens
		var pack events.ContextPack
		for i := range budget / 30 {
			pack.SemanticItems = append(pack.SemanticItems, events.PackItem{ID: fmt.Sprintf("f%03d", i), Kind: events.PackKindSemantic, Text: "user fact " + long, Score: 1, Scope: events.MemoryScopeUser})
		}
		for i := range 20 {
			pack.AgentItems = append(pack.AgentItems, events.PackItem{Kind: events.PackKindChunk, Text: fmt.Sprintf("agent step %d %s", i, long), Scope: events.MemoryScopeAgent})
			pack.TenantItems = append(pack.TenantItems, events.PackItem{Kind: events.PackKindItem, Text: fmt.Sprintf("team rule %d %s", i, long), Scope: events.MemoryScopeTenant})
		}
		render(&pack, budget, sh)
		tokens := map[string]int{}
		for _, s := range pack.Sections {
			tokens[s.Name] = s.Tokens
		}
		for name, percent := range map[string]int{"agent_items": sh.agent, "tenant_items": sh.tenant} {
			if limit := (budget*4*percent/100 + 3) / 4; tokens[name] > limit {
				t.Fatalf("%s takes %d tokens, over its %d%% share (%d) of %d", name, tokens[name], percent, limit, budget)
			}
		}
		// A shared entry is about 45 tokens with the section heading; the user's
		// memory keeps at least 20 % of at least 400 tokens, room for a fact.
		if budget*sh.agent/100 >= 50 && (len(pack.AgentItems) == 0 || !strings.Contains(pack.Prompt, "## Agent knowledge\n\n- agent step 0 ")) {
			t.Fatalf("agent share %d%% of %d: no agent entry:\n%s", sh.agent, budget, pack.Prompt)
		}
		if budget*sh.tenant/100 >= 50 && (len(pack.TenantItems) == 0 || !strings.Contains(pack.Prompt, "## Tenant knowledge\n\n- team rule 0 ")) {
			t.Fatalf("tenant share %d%% of %d: no tenant entry:\n%s", sh.tenant, budget, pack.Prompt)
		}
		if len(pack.SemanticItems) == 0 || pack.TokenEstimate > budget {
			t.Fatalf("user facts %d, estimate %d of %d", len(pack.SemanticItems), pack.TokenEstimate, budget)
		}
		if err := (func() error { pack.Tenant, pack.UserID = "acme", "u1"; pack.Recount(); return pack.Validate() })(); err != nil {
			t.Fatal(err)
		}
	})
}
