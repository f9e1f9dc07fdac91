package retrieve

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/session"
)

// loadHandover fills the pack's hand-over (issue 31): when the session the user
// had before req's (session.Previous of the user's recent sessions) was held by
// another agent than req.AgentID, that session's summary and what it left
// open, so the agent now asking continues instead of starting cold. A request
// without agent_id names no agent to compare with and gets none.
func (s *Service) loadHandover(ctx context.Context, tenant string, req events.ContextRequest, pack *events.ContextPack) error {
	if req.AgentID == "" {
		return nil
	}
	recent, err := s.deps.Sessions.RecentSessions(ctx, tenant, req.UserID)
	if err != nil {
		return err
	}
	prev, ok := session.Previous(recent, req.SessionID)
	if !ok || prev.AgentID == "" || prev.AgentID == req.AgentID {
		return nil
	}
	st, err := s.deps.Sessions.Get(ctx, tenant, req.UserID, prev.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return nil // cleared since it was listed
	}
	if err != nil {
		return err
	}
	h := &events.Handover{AgentID: prev.AgentID, SessionID: prev.SessionID, StartedTS: st.FirstTS}
	// The running summary, then a digest of the messages after it: of a whole
	// session without one, the sentences with the names, numbers, identifiers,
	// decisions and errors the next agent continues from.
	sum, err := s.storedSummary(ctx, tenant, st)
	if err != nil {
		return err
	}
	h.Summary = s.summaryText(tenant, sum.Text, sum.After(st.Recent))
	items, err := s.deps.Memories.ListItems(ctx, tenant, events.ItemScopeRequest{UserID: req.UserID, Scope: events.ScopeSession, SessionID: prev.SessionID, Limit: s.cfg.ItemsLimit})
	if err != nil {
		return err
	}
	h.OpenItems = items.Items
	if st.Turns > 0 {
		turns, err := s.deps.Sessions.ListTurns(ctx, tenant+"."+req.UserID+"."+prev.SessionID)
		if err != nil {
			return err
		}
		turns = slices.DeleteFunc(turns, func(t events.TurnRecord) bool { return t.Status == events.TurnOK })
		h.OpenTurns = turns[max(0, len(turns)-s.cfg.RecentTurns):]
	}
	if h.Summary != "" || len(h.OpenItems) > 0 || len(h.OpenTurns) > 0 {
		pack.Handover = h
	}
	return nil
}

// storedSummary is the running summary of st's session (SPEC B2); the zero
// Summary, which covers no message, when it has none.
func (s *Service) storedSummary(ctx context.Context, tenant string, st session.State) (session.Summary, error) {
	sum, _, err := s.deps.Sessions.GetSummary(ctx, tenant, st.UserID, st.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return session.Summary{}, nil
	}
	return sum, err
}

// handoverEntries renders the hand-over: its summary, then each open item and
// each unfinished turn, one entry each.
func handoverEntries(h *events.Handover) []entry {
	var out []entry
	if h.Summary != "" {
		out = append(out, newEntry("", strings.TrimRight(h.Summary, "\n")))
	}
	for _, it := range h.OpenItems {
		out = append(out, newEntry("- open "+string(it.Kind)+" "+it.Key+": ", it.Content))
	}
	for _, t := range h.OpenTurns {
		body := t.Plan
		if t.Error != "" {
			body = strings.TrimSpace(body + " (" + t.Error + ")")
		}
		out = append(out, newEntry("- unfinished turn "+t.TurnID+" ["+string(t.Status)+"]: ", body))
	}
	return out
}

// keepHandover cuts the pack's hand-over to the entries of handoverEntries at
// idx (ascending); none kept drops it.
func keepHandover(pack *events.ContextPack, idx []int) {
	h := pack.Handover
	if len(idx) == 0 {
		pack.Handover = nil
		return
	}
	cut := *h
	cut.Summary, cut.OpenItems, cut.OpenTurns = "", nil, nil
	offset := 0
	if h.Summary != "" {
		offset = 1
	}
	for _, i := range idx {
		switch {
		case i < offset:
			cut.Summary = h.Summary
		case i < offset+len(h.OpenItems):
			cut.OpenItems = append(cut.OpenItems, h.OpenItems[i-offset])
		default:
			cut.OpenTurns = append(cut.OpenTurns, h.OpenTurns[i-offset-len(h.OpenItems)])
		}
	}
	pack.Handover = &cut
}
