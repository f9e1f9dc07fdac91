package retrieve

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// loadScopes fills agent_items (the request agent's agent scope) and
// tenant_items (the tenant scope) of a context pack, and adds to degraded what
// their recall did without (the caller merges it into the pack once the
// user's recall, which may run beside, is done); a scope whose share of the
// budget (pol.PackAgentPercent, PackTenantPercent) is 0 is not read. The
// scopes are read side by side, and merged in pack order.
func (s *Service) loadScopes(ctx context.Context, tenant string, req events.ContextRequest, terms []string, pol policy.Policy, pack *events.ContextPack, degraded *[]string) error {
	type scoped struct {
		list  *[]events.PackItem
		items []events.PackItem
		more  []string
		err   error
	}
	owners := events.ReadOwners(req.UserID, req.AgentID)[1:]
	read := make([]scoped, len(owners))
	var wg sync.WaitGroup
	for i, owner := range owners {
		list, percent := &pack.TenantItems, pol.PackTenantPercent
		if events.OwnerScope(owner) == events.MemoryScopeAgent {
			list, percent = &pack.AgentItems, pol.PackAgentPercent
		}
		if percent == 0 {
			continue
		}
		read[i].list = list
		wg.Go(func() { read[i].items, read[i].more, read[i].err = s.scopeItems(ctx, tenant, owner, req, terms, pol) })
	}
	wg.Wait()
	for i, r := range read {
		if r.err != nil {
			return fmt.Errorf("%s scope: %w", events.OwnerScope(owners[i]), r.err)
		}
		if r.list != nil {
			*r.list = r.items
			*degraded = addDegraded(*degraded, r.more)
		}
	}
	return nil
}

// scopeItems are the pack entries of one shared scope's memory (owner), in
// the order the budget takes them: its memory items, then its vector memories
// recalled for the query (best first), then the chunks of its MEMORY.md the
// query matches, or the head of MEMORY.md when there is no query or no chunk
// matches. Each is tagged with the scope.
func (s *Service) scopeItems(ctx context.Context, tenant, owner string, req events.ContextRequest, terms []string, pol policy.Policy) ([]events.PackItem, []string, error) {
	scope := events.OwnerScope(owner)
	items, err := s.deps.Memories.PackItems(ctx, tenant, owner, "", s.cfg.ItemsLimit)
	if err != nil {
		return nil, nil, fmt.Errorf("memory items: %w", err)
	}
	var out []events.PackItem
	for _, it := range slices.Concat(items.Persona, items.UserProfile) {
		out = append(out, events.PackItem{ID: string(it.Kind) + ":" + it.Key, Kind: events.PackKindItem, Text: it.Content, Score: it.Confidence, Scope: scope})
	}
	var degraded []string
	if !req.Lightweight && len(terms) > 0 {
		recalled, err := s.deps.Memories.RecallStatus(ctx, tenant, owner, req.Query,
			[]vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic},
			map[vectorstore.MemoryType]int{vectorstore.Episodic: s.cfg.KEpisodic, vectorstore.Semantic: s.cfg.KSemantic})
		if err != nil {
			return nil, nil, fmt.Errorf("recall: %w", err)
		}
		degraded = recalled.Degraded
		for _, r := range recalled.Ranked {
			if r.Score < s.cfg.MinScore {
				break // best first: the floor cuts the tail
			}
			out = append(out, recordItem(r, scope))
		}
	}
	ns := docstore.Namespace{Tenant: tenant, User: owner}
	doc, err := s.readDoc(ctx, ns, docstore.MemoryFile)
	if err != nil || doc == nil || strings.TrimSpace(doc.text) == "" {
		return out, degraded, err
	}
	if !req.Lightweight && len(terms) > 0 {
		if found := doc.index().SearchTerms(terms, pol.RetrieveLimit); len(found) > 0 {
			return append(out, chunkItems(found, scope)...), degraded, nil
		}
	}
	head := markdown.Head(doc.text, s.cfg.AutoLoadLines)
	return append(out, events.PackItem{Kind: events.PackKindCore, Text: head, Source: events.Provenance{File: docstore.MemoryFile}, Scope: scope}), degraded, nil
}

// addDegraded appends the reasons of more whose kind (the text before the
// first ':', "embedder unavailable") list does not name yet: the scopes of one
// request are recalled with one embedder, which fails for each alike, worded
// a little differently once it is known to be down.
func addDegraded(list, more []string) []string {
	for _, d := range more {
		kind, _, _ := strings.Cut(d, ":")
		if !slices.ContainsFunc(list, func(l string) bool { return strings.HasPrefix(l, kind+":") || l == kind }) {
			list = append(list, d)
		}
	}
	return list
}
