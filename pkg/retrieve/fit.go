package retrieve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// ErrReplyTooLarge reports a reply that does not fit in one NATS message (the
// connection's max_payload) and cannot be cut to fit; it is answered with 413.
var ErrReplyTooLarge = errors.New("retrieve: reply too large")

// cuttable is a reply made of ranked units (list items, lines of the core memory)
// that can lose its lowest-ranked ones to fit in one message.
type cuttable interface {
	// units is how many units the reply has.
	units() int
	// keep returns the reply with only its n best units, marked truncated. It
	// never changes the receiver, whose slices it may share.
	keep(n int) any
}

// cutterFor returns the cuttable form of a reply, or nil for a reply that has no
// ranked units to drop (a single memory, a topic file, a session archive: a part
// of those would be a wrong answer, not a shorter one).
func cutterFor(reply any) cuttable {
	switch r := reply.(type) {
	case events.ContextPack:
		return packCut(r)
	case events.SearchReply:
		return searchCut(r)
	case events.ItemListReply:
		return itemsCut(r)
	case events.HistoryReply:
		return historyCut(r)
	case events.EventsListReply:
		return eventsCut(r)
	case events.DLQListReply:
		return dlqCut(r)
	}
	return nil
}

// fit encodes reply into buf (reset first) so that it is at most limit bytes: as it
// is when it fits, otherwise cut to the most units that fit (a binary search over
// the number kept, one encoding per step). A reply that cannot be cut, or does not
// fit even with no units, is ErrReplyTooLarge naming the sizes.
func fit(buf *bytes.Buffer, endpoint string, reply any, limit int) error {
	if err := encode(buf, reply); err != nil {
		return fmt.Errorf("encode %s reply: %w", endpoint, err)
	}
	size := buf.Len()
	if size <= limit {
		return nil
	}
	tooLarge := fmt.Errorf("%w: the %s reply is %d bytes, over the connection's max payload of %d bytes", ErrReplyTooLarge, endpoint, size, limit)
	c := cutterFor(reply)
	if c == nil {
		return tooLarge
	}
	n := c.units()
	// best is the largest count that fits; sort.Search finds the first that does not.
	best := sort.Search(n+1, func(k int) bool {
		return encode(buf, c.keep(k)) != nil || buf.Len() > limit
	}) - 1
	if best < 0 {
		return tooLarge
	}
	if err := encode(buf, c.keep(best)); err != nil {
		return fmt.Errorf("encode %s reply: %w", endpoint, err)
	}
	return nil
}

// encode writes v's JSON to buf, replacing what was there, without the newline
// json.Encoder ends a value with.
func encode(buf *bytes.Buffer, v any) error {
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1)
	return nil
}

// searchCut keeps the first results: search merges its lists best first.
type searchCut events.SearchReply

func (r searchCut) units() int { return len(r.Results) }

func (r searchCut) keep(n int) any {
	return events.SearchReply{Results: r.Results[:n], Truncated: true}
}

// itemsCut keeps the first items, in the order listed or ranked.
type itemsCut events.ItemListReply

func (r itemsCut) units() int { return len(r.Items) }

func (r itemsCut) keep(n int) any {
	return events.ItemListReply{Items: r.Items[:n], Truncated: true}
}

// historyCut keeps the newest changes (the list is oldest first).
type historyCut events.HistoryReply

func (r historyCut) units() int { return len(r.Changes) }

func (r historyCut) keep(n int) any {
	return events.HistoryReply{ID: r.ID, Changes: r.Changes[len(r.Changes)-n:], Truncated: true}
}

// packCut cuts a context pack in the reverse of render's drop order, so the units
// kept longest are the lines of the core memory (first lines first), then the
// persona, user profile, session items, agent and tenant scope entries, known facts, topics, episodic memories,
// recent session messages (newest first), chunks and daily notes (each best first),
// and last the recent turns (newest first), which the prompt does not show. The
// prompt is rendered again from what is kept.
type packCut events.ContextPack

// coreLines is how many lines the core memory has.
func (p packCut) coreLines() int {
	if p.Core == nil {
		return 0
	}
	return markdown.CountLines(p.Core.Text)
}

func (p packCut) units() int {
	return p.coreLines() + len(p.Persona) + len(p.UserProfile) + len(p.SessionItems) + len(p.AgentItems) + len(p.TenantItems) + len(p.SemanticItems) +
		len(p.Topics) + len(p.EpisodicItems) + len(p.RecentEvents) + len(p.Chunks) + len(p.DailyNotes) + len(p.RecentTurns)
}

func (p packCut) keep(n int) any {
	pack := events.ContextPack(p)
	take := func(l int) int {
		k := min(l, n)
		n -= k
		return k
	}
	if lines := p.coreLines(); lines > 0 {
		switch k := take(lines); {
		case k == 0:
			pack.Core = nil
		case k < lines:
			core := *p.Core
			core.Text = markdown.Head(core.Text, k)
			pack.Core = &core
		}
	}
	pack.Persona = pack.Persona[:take(len(pack.Persona))]
	pack.UserProfile = pack.UserProfile[:take(len(pack.UserProfile))]
	pack.SessionItems = pack.SessionItems[:take(len(pack.SessionItems))]
	pack.AgentItems = pack.AgentItems[:take(len(pack.AgentItems))]
	pack.TenantItems = pack.TenantItems[:take(len(pack.TenantItems))]
	pack.SemanticItems = pack.SemanticItems[:take(len(pack.SemanticItems))]
	pack.Topics = pack.Topics[:take(len(pack.Topics))]
	pack.EpisodicItems = pack.EpisodicItems[:take(len(pack.EpisodicItems))]
	pack.RecentEvents = pack.RecentEvents[len(pack.RecentEvents)-take(len(pack.RecentEvents)):]
	pack.Chunks = pack.Chunks[:take(len(pack.Chunks))]
	pack.DailyNotes = pack.DailyNotes[:take(len(pack.DailyNotes))]
	pack.RecentTurns = pack.RecentTurns[len(pack.RecentTurns)-take(len(pack.RecentTurns)):]
	// The estimate bounds the rendered length of what is left (4 runes a token,
	// rounded up, plus the final newline), so rendering within it drops nothing
	// more.
	budget := pack.BudgetTokens
	render(&pack, pack.TokenEstimate+1, noShares)
	pack.BudgetTokens = budget
	pack.Recount()
	pack.Truncated = true
	return pack
}
