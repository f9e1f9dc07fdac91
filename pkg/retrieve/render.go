package retrieve

import (
	"strings"
	"unicode/utf8"

	"github.com/agentmem/agentmem/events"
)

// A prompt section: its heading, its rendered entries, and how the pack list behind
// it is cut when the prompt is over budget.
type part struct {
	title     string // "" for a part whose entries carry their own headings (topics)
	entries   []entry
	lo, hi    int  // entries[lo:hi] are kept
	dropFront bool // drop the oldest first (the list is oldest first)
	keep      func(lo, hi int)
}

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

func (p *part) kept() int { return p.hi - p.lo }

// render sets pack.Prompt and pack.TokenEstimate. Sections, in prompt order:
// Persona, User profile, Core memory, Topic: <name>, Relevant notes (chunks), Recent
// notes (daily notes), Known facts (semantic), Episodic memories, Session items,
// Session summary, Recent session. recent_turns are structured data and are not
// rendered.
//
// When the estimate exceeds maxTokens, entries are dropped, from the pack as well as
// from the prompt, lowest priority first: daily notes (oldest first), chunks (lowest
// score first), recent session messages (oldest first), the session summary,
// episodic memories, topics, known facts, session items, user profile, persona
// (each lowest ranked first). The
// core memory is never dropped (SPEC A2), so a core larger than the budget is sent
// whole.
//
// TokenEstimate is the prompt's length in characters (runes) divided by 4, rounded
// up: the usual rule of thumb for English text with BPE tokenizers.
func render(pack *events.ContextPack, maxTokens int) {
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
			out[i] = newEntry(prefix, strings.TrimRight(it.Text, "\n"))
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

	// Prompt order; drop order is given by dropOrder below.
	persona := newPart("Persona", items(pack.Persona), false, func(lo, hi int) { pack.Persona = pack.Persona[lo:hi] })
	profile := newPart("User profile", items(pack.UserProfile), false, func(lo, hi int) { pack.UserProfile = pack.UserProfile[lo:hi] })
	corePart := newPart("Core memory", core, false, nil)
	topicPart := newPart("", topics, false, func(lo, hi int) { pack.Topics = pack.Topics[lo:hi] })
	chunks := newPart("Relevant notes", texts(pack.Chunks, ""), false, func(lo, hi int) { pack.Chunks = pack.Chunks[lo:hi] })
	daily := newPart("Recent notes", notes, false, func(lo, hi int) { pack.DailyNotes = pack.DailyNotes[lo:hi] })
	facts := newPart("Known facts", texts(pack.SemanticItems, "- "), false, func(lo, hi int) { pack.SemanticItems = pack.SemanticItems[lo:hi] })
	episodic := newPart("Episodic memories", texts(pack.EpisodicItems, "- "), false, func(lo, hi int) { pack.EpisodicItems = pack.EpisodicItems[lo:hi] })
	sessionItems := newPart("Session items", items(pack.SessionItems), false, func(lo, hi int) { pack.SessionItems = pack.SessionItems[lo:hi] })
	var summary []entry
	if pack.SessionSummary != "" {
		summary = []entry{newEntry("", pack.SessionSummary)}
	}
	summaryPart := newPart("Session summary", summary, false, func(lo, hi int) {
		if hi <= lo {
			pack.SessionSummary, pack.SessionSummarySource = "", nil
		}
	})
	history := newPart("Recent session", recent, true, func(lo, hi int) { pack.RecentEvents = pack.RecentEvents[lo:hi] })

	parts := []*part{persona, profile, corePart, topicPart, chunks, daily, facts, episodic, sessionItems, summaryPart, history}
	dropOrder := []*part{daily, chunks, history, summaryPart, episodic, topicPart, facts, sessionItems, profile, persona}

	budget := maxTokens * 4
	total := 0
	for _, p := range parts {
		total += p.cost()
	}
	for _, p := range dropOrder {
		for total > budget && p.kept() > 0 {
			before := p.cost()
			if p.dropFront {
				p.lo++
			} else {
				p.hi--
			}
			total -= before - p.cost()
		}
		if p.kept() < len(p.entries) {
			p.keep(p.lo, p.hi)
		}
	}

	var b strings.Builder
	b.Grow(total)
	for _, p := range parts {
		if p.kept() == 0 {
			continue
		}
		if p.title != "" {
			b.WriteString("## " + p.title + "\n\n")
		}
		for _, e := range p.entries[p.lo:p.hi] {
			b.WriteString(e.head)
			b.WriteString(e.body)
			b.WriteString("\n\n")
		}
	}
	pack.Prompt = strings.TrimSuffix(b.String(), "\n")
	// total counts the prompt's runes already, with the newline just trimmed.
	pack.TokenEstimate = (max(total-1, 0) + 3) / 4
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

func newPart(title string, entries []entry, dropFront bool, keep func(lo, hi int)) *part {
	return &part{title: title, entries: entries, hi: len(entries), dropFront: dropFront, keep: keep}
}

// cost is the part's rendered length in runes: heading plus entries, each followed
// by a blank line.
func (p *part) cost() int {
	if p.kept() == 0 {
		return 0
	}
	n := 0
	if p.title != "" {
		n += utf8.RuneCountInString(p.title) + 5 // "## " + "\n\n"
	}
	for _, e := range p.entries[p.lo:p.hi] {
		n += e.runes + 2
	}
	return n
}
