package retrieve

import (
	"strings"
	"unicode/utf8"

	"github.com/agentmem/agentmem/events"
)

// A prompt section: the pack list behind it (name), its heading, its rendered
// entries, and which of them the budget kept.
type part struct {
	name  string
	title string // "" for a part whose entries carry their own headings (topics)
	// entries are the list's entries in list order; in[i] says entries[i] is kept.
	entries []entry
	in      []bool
	n       int // how many are kept
	// keep, when set, cuts the pack's list to the kept entries (their indices, in
	// list order); nil for the core memory, which is always kept.
	keep func(idx []int)
	// capRunes > 0 bounds the part's rendered runes (a memory scope's share of
	// the budget).
	capRunes int
}

// shares are the most of a pack's budget, in percent, the agent and the
// tenant scope's entries may take (policy pack_agent_percent,
// pack_tenant_percent).
type shares struct{ agent, tenant int }

// noShares bounds neither scope: re-rendering a pack that was already filled
// within its shares (packCut) must not drop more of them.
var noShares = shares{agent: 100, tenant: 100}

// entry is one entry of a part, rendered as head then body: the pack's text is
// written straight into the prompt rather than copied into a string per entry
// first, and its length in runes is counted once.
type entry struct {
	head, body string
	runes      int
}

func newEntry(head, body string) entry {
	return entry{head: head, body: body, runes: utf8.RuneCountInString(head) + utf8.RuneCountInString(body)}
}

// unit is one entry of one part, a step of the budget's fill.
type unit struct {
	p *part
	i int
}

// render sets pack.Prompt, pack.TokenEstimate, pack.BudgetTokens and
// pack.Sections. Sections, in prompt order: Persona, User profile, Core memory,
// Handover from agent <agent> (session <session>), Topic: <name>, Relevant
// notes (chunks), Recent notes (daily notes), Known facts (semantic), Episodic
// memories, Agent knowledge (agent_items), Tenant knowledge (tenant_items),
// Session items, Session summary, Recent session.
// recent_turns are structured data and are not rendered.
//
// The prompt is filled within maxTokens by priority, one entry at a time, each
// entry taken when it still fits (a long entry that does not fit is left out, and
// shorter ones after it can still be taken):
//
//  1. the core memory, always and whole (SPEC A2), even when it alone is over
//     the budget;
//  2. the memory items: persona, user profile, session items (each in list order);
//     then the hand-over: the previous session's summary, its open items and
//     unfinished turns; then the agent scope's and the tenant scope's entries
//     (in list order), each within its share of the budget (sh), so shared
//     knowledge is there however much the user's memory holds and never takes
//     more than its share;
//  3. the topic files loaded for the query;
//  4. the ranked memories: known facts and episodic memories together by score
//     (best first, ties by id, the order the recall ranked them in), then the
//     chunks of MEMORY.md best first;
//  5. the session summary (the messages it stands for are not in the pack), then
//     the recent session messages after it, newest first;
//  6. the daily notes, newest first.
//
// Entries left out are dropped from the pack as well as from the prompt, so the
// pack holds what the prompt shows; no entry is there twice (dedupe runs before).
//
// TokenEstimate is the prompt's length in characters (runes) divided by 4, rounded
// up: the usual rule of thumb for English text with BPE tokenizers. A section's
// tokens are its own runes (heading and the blank lines after its entries
// included) the same way.
func render(pack *events.ContextPack, maxTokens int, sh shares) {
	items := func(list []events.MemoryItem) []entry {
		out := make([]entry, len(list))
		for i, it := range list {
			out[i] = newEntry("- "+string(it.Kind)+" "+it.Key+": ", it.Content)
		}
		return out
	}
	texts := func(list []events.PackItem, prefix string) []entry {
		out := make([]entry, len(list))
		for i, it := range list {
			out[i] = newEntry(prefix, withContext(strings.TrimRight(it.Text, "\n"), it.Context))
		}
		return out
	}
	var core []entry
	if pack.Core != nil {
		core = []entry{newEntry("", strings.TrimRight(pack.Core.Text, "\n"))}
	}
	topics := make([]entry, len(pack.Topics))
	for i, t := range pack.Topics {
		topics[i] = newEntry("## Topic: "+t.ID+"\n\n", strings.TrimRight(t.Text, "\n"))
	}
	notes := make([]entry, len(pack.DailyNotes))
	for i, n := range pack.DailyNotes {
		notes[i] = newEntry("### "+n.ID+"\n\n", strings.TrimRight(n.Text, "\n"))
	}
	recent := make([]entry, len(pack.RecentEvents))
	for i, e := range pack.RecentEvents {
		recent[i] = newEntry(rolePrefix(e.Obs.Role), e.Obs.Text)
	}

	// Prompt order.
	persona := newPart("persona", "Persona", items(pack.Persona), func(idx []int) { pack.Persona = pick(pack.Persona, idx) })
	profile := newPart("user_profile", "User profile", items(pack.UserProfile), func(idx []int) { pack.UserProfile = pick(pack.UserProfile, idx) })
	corePart := newPart("core", "Core memory", core, nil)
	topicPart := newPart("topics", "", topics, func(idx []int) { pack.Topics = pick(pack.Topics, idx) })
	chunks := newPart("chunks", "Relevant notes", texts(pack.Chunks, ""), func(idx []int) { pack.Chunks = pick(pack.Chunks, idx) })
	daily := newPart("daily_notes", "Recent notes", notes, func(idx []int) { pack.DailyNotes = pick(pack.DailyNotes, idx) })
	facts := newPart("semantic_items", "Known facts", texts(pack.SemanticItems, "- "), func(idx []int) { pack.SemanticItems = pick(pack.SemanticItems, idx) })
	episodic := newPart("episodic_items", "Episodic memories", texts(pack.EpisodicItems, "- "), func(idx []int) { pack.EpisodicItems = pick(pack.EpisodicItems, idx) })
	sessionItems := newPart("session_items", "Session items", items(pack.SessionItems), func(idx []int) { pack.SessionItems = pick(pack.SessionItems, idx) })
	var summary []entry
	if pack.SessionSummary != "" {
		summary = []entry{newEntry("", pack.SessionSummary)}
	}
	summaryPart := newPart("session_summary", "Session summary", summary, func(idx []int) {
		if len(idx) == 0 {
			pack.SessionSummary, pack.SessionSummarySource = "", nil
		}
	})
	history := newPart("recent_events", "Recent session", recent, func(idx []int) { pack.RecentEvents = pick(pack.RecentEvents, idx) })
	var (
		handoverTitle string
		handoverItems []entry
	)
	if h := pack.Handover; h != nil {
		handoverTitle, handoverItems = "Handover from agent "+h.AgentID+" (session "+h.SessionID+")", handoverEntries(h)
	}
	handover := newPart("handover", handoverTitle, handoverItems, func(idx []int) { keepHandover(pack, idx) })
	agentPart := newPart("agent_items", "Agent knowledge", scopeEntries(pack.AgentItems), func(idx []int) { pack.AgentItems = pick(pack.AgentItems, idx) })
	tenantPart := newPart("tenant_items", "Tenant knowledge", scopeEntries(pack.TenantItems), func(idx []int) { pack.TenantItems = pick(pack.TenantItems, idx) })
	agentPart.capRunes, tenantPart.capRunes = maxTokens*4*sh.agent/100, maxTokens*4*sh.tenant/100
	parts := []*part{persona, profile, corePart, handover, topicPart, chunks, daily, facts, episodic, agentPart, tenantPart, sessionItems, summaryPart, history}

	// Priority order (see above).
	var order []unit
	inOrder := func(p *part) {
		for i := range p.entries {
			order = append(order, unit{p, i})
		}
	}
	newestFirst := func(p *part) {
		for i := len(p.entries) - 1; i >= 0; i-- {
			order = append(order, unit{p, i})
		}
	}
	inOrder(persona)
	inOrder(profile)
	inOrder(sessionItems)
	inOrder(handover)
	inOrder(agentPart)
	inOrder(tenantPart)
	inOrder(topicPart)
	order = append(order, ranked(facts, pack.SemanticItems, episodic, pack.EpisodicItems)...)
	inOrder(chunks)
	inOrder(summaryPart)
	newestFirst(history)
	inOrder(daily) // RecentDailyNotes lists them newest first

	budget := maxTokens * 4
	total := 0
	if len(core) > 0 {
		corePart.in[0], corePart.n = true, 1
		total = corePart.cost()
	}
	for _, u := range order {
		add := u.p.entries[u.i].runes + 2
		if u.p.n == 0 && u.p.title != "" {
			add += utf8.RuneCountInString(u.p.title) + 5 // "## " + "\n\n"
		}
		if total+add <= budget && (u.p.capRunes == 0 || u.p.cost()+add <= u.p.capRunes) {
			u.p.in[u.i] = true
			u.p.n++
			total += add
		}
	}

	var b strings.Builder
	b.Grow(total)
	pack.Sections = nil // a new list: a cut pack (packCut) shares the old one
	for _, p := range parts {
		if len(p.entries) == 0 {
			continue
		}
		kept := p.kept()
		pack.Sections = append(pack.Sections, events.PackSection{Name: p.name, Entries: kept, Dropped: len(p.entries) - kept, Tokens: (p.cost() + 3) / 4})
		if kept < len(p.entries) && p.keep != nil {
			idx := make([]int, 0, kept)
			for i, in := range p.in {
				if in {
					idx = append(idx, i)
				}
			}
			p.keep(idx)
		}
		if kept == 0 {
			continue
		}
		if p.title != "" {
			b.WriteString("## " + p.title + "\n\n")
		}
		for i, e := range p.entries {
			if !p.in[i] {
				continue
			}
			b.WriteString(e.head)
			b.WriteString(e.body)
			b.WriteString("\n\n")
		}
	}
	pack.Prompt = strings.TrimSuffix(b.String(), "\n")
	// total counts the prompt's runes already, with the newline just trimmed.
	pack.TokenEstimate = (max(total-1, 0) + 3) / 4
	pack.BudgetTokens = maxTokens
}

// scopeEntries renders a memory scope's entries: the head of its MEMORY.md as
// it is, every other entry as a list item.
func scopeEntries(list []events.PackItem) []entry {
	out := make([]entry, len(list))
	for i, it := range list {
		prefix := "- "
		if it.Kind == events.PackKindCore {
			prefix = ""
		}
		out[i] = newEntry(prefix, withContext(strings.TrimRight(it.Text, "\n"), it.Context))
	}
	return out
}

// withContext renders an entry's text and, on a line of its own under it, its
// context (an episode's earlier messages): shown as the situation the statement
// was said in, not as more facts of the memory.
func withContext(text string, context []string) string {
	if len(context) == 0 {
		return text
	}
	return text + "\n  context: " + strings.Join(context, " / ")
}

// ranked returns the known facts and episodic memories as one ranking: by score,
// best first, ties by id (each list is already best first).
func ranked(facts *part, factItems []events.PackItem, episodes *part, episodeItems []events.PackItem) []unit {
	out := make([]unit, 0, len(factItems)+len(episodeItems))
	i, j := 0, 0
	for i < len(factItems) || j < len(episodeItems) {
		takeFact := j == len(episodeItems) || (i < len(factItems) &&
			(factItems[i].Score > episodeItems[j].Score || factItems[i].Score == episodeItems[j].Score && factItems[i].ID < episodeItems[j].ID))
		if takeFact {
			out = append(out, unit{facts, i})
			i++
		} else {
			out = append(out, unit{episodes, j})
			j++
		}
	}
	return out
}

// pick returns the elements of list at idx (ascending), in place.
func pick[T any](list []T, idx []int) []T {
	out := list[:0]
	for _, i := range idx {
		out = append(out, list[i])
	}
	return out
}

// rolePrefix is "<role>: ", without a new string for the usual roles.
func rolePrefix(r events.Role) string {
	switch r {
	case events.RoleUser:
		return "user: "
	case events.RoleAssistant:
		return "assistant: "
	case events.RoleTool:
		return "tool: "
	case events.RoleSystem:
		return "system: "
	}
	return string(r) + ": "
}

func newPart(name, title string, entries []entry, keep func(idx []int)) *part {
	return &part{name: name, title: title, entries: entries, in: make([]bool, len(entries)), keep: keep}
}

// kept is how many of the part's entries are kept.
func (p *part) kept() int { return p.n }

// cost is the part's rendered length in runes: heading plus kept entries, each
// followed by a blank line.
func (p *part) cost() int {
	n := 0
	for i, e := range p.entries {
		if p.in[i] {
			n += e.runes + 2
		}
	}
	if n > 0 && p.title != "" {
		n += utf8.RuneCountInString(p.title) + 5 // "## " + "\n\n"
	}
	return n
}
