package consolidate

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Default consolidation thresholds (SPEC C6, C7).
const (
	DefaultMergeThreshold    = 0.85
	DefaultSeparateThreshold = 0.65
	DefaultSameChatWindow    = 30 * time.Minute
	DefaultCrossChatWindow   = 7 * 24 * time.Hour
)

// Thresholds decide what consolidation does with a pair of episodic memories.
type Thresholds struct {
	Merge           float64       // cosine at or above which a pair passing the hard rules is merged (0.85)
	Separate        float64       // cosine at or above which a pair is at least separated (0.65)
	SameChatWindow  time.Duration // largest time gap of a mergeable pair from one chat (30 min)
	CrossChatWindow time.Duration // largest time gap of a mergeable pair from two chats (7 days)
}

// DefaultThresholds returns the SPEC values.
func DefaultThresholds() Thresholds {
	return Thresholds{
		Merge:           DefaultMergeThreshold,
		Separate:        DefaultSeparateThreshold,
		SameChatWindow:  DefaultSameChatWindow,
		CrossChatWindow: DefaultCrossChatWindow,
	}
}

// withDefaults fills zero fields with the defaults.
func (t Thresholds) withDefaults() Thresholds {
	d := DefaultThresholds()
	return Thresholds{
		Merge:           cmp.Or(t.Merge, d.Merge),
		Separate:        cmp.Or(t.Separate, d.Separate),
		SameChatWindow:  cmp.Or(t.SameChatWindow, d.SameChatWindow),
		CrossChatWindow: cmp.Or(t.CrossChatWindow, d.CrossChatWindow),
	}
}

// Validate reports what is wrong with the thresholds, if anything.
func (t Thresholds) Validate() error {
	switch {
	case t.Separate < -1 || t.Separate > 1 || t.Merge < -1 || t.Merge > 1:
		return fmt.Errorf("%w: thresholds must be cosines in [-1, 1] (merge %v, separate %v)", ErrInvalidConfig, t.Merge, t.Separate)
	case t.Separate > t.Merge:
		return fmt.Errorf("%w: separate threshold %v is above merge threshold %v", ErrInvalidConfig, t.Separate, t.Merge)
	case t.SameChatWindow < 0 || t.CrossChatWindow < 0:
		return fmt.Errorf("%w: time windows must not be negative (same chat %s, cross chat %s)", ErrInvalidConfig, t.SameChatWindow, t.CrossChatWindow)
	}
	return nil
}

// HardRulesPass reports whether a and b may be merged at all (SPEC C7): same
// speaker, and at most SameChatWindow apart in one chat or CrossChatWindow apart
// across chats.
func HardRulesPass(a, b vectorstore.Record, th Thresholds) bool {
	if a.Who != b.Who {
		return false
	}
	gap := a.TS.Sub(b.TS).Abs()
	if a.ChatID == b.ChatID {
		return gap <= th.SameChatWindow
	}
	return gap <= th.CrossChatWindow
}

// ActionKind is what consolidation does with a pair.
type ActionKind int

// The actions of a plan.
const (
	ActionMerge ActionKind = iota + 1
	ActionSeparate
)

func (k ActionKind) String() string {
	switch k {
	case ActionMerge:
		return "merge"
	case ActionSeparate:
		return "separate"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one step of a consolidation plan; A has the smaller id.
type Action struct {
	Kind       ActionKind
	A, B       vectorstore.Record
	Similarity float64
}

// Similarity is the cosine the planner uses for two vectors; vectors of different
// lengths, or all zeros, give 0.
func Similarity(a, b []float32) float64 { return float64(embed.Cosine(a, b)) }

// Plan decides what to do with episodes (SPEC C6). Pairs are taken greedily by
// descending cosine (ties by the pair's ids), and each record joins at most one
// action, so merges never chain within one run. A pair with cosine ≥ th.Merge
// that passes the hard rules is merged; a pair with th.Separate ≤ cosine <
// th.Merge, or with cosine ≥ th.Merge that fails the hard rules, is separated;
// anything lower is left alone. Records without a vector, and pairs already
// separated from each other (MetaSeparatedFromIDs), are not paired. The result
// depends only on the set of records (ids are unique), not their order.
func Plan(episodes []vectorstore.Record, th Thresholds) []Action {
	recs := make([]vectorstore.Record, 0, len(episodes))
	for _, r := range episodes {
		if len(r.Vector) > 0 {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(a, b vectorstore.Record) int { return cmp.Compare(a.ID, b.ID) })

	type pair struct {
		i, j int
		sim  float64
	}
	var pairs []pair
	for i := range recs {
		for j := i + 1; j < len(recs); j++ {
			if sim := Similarity(recs[i].Vector, recs[j].Vector); sim >= th.Separate && !separated(recs[i], recs[j]) {
				pairs = append(pairs, pair{i, j, sim})
			}
		}
	}
	// recs is sorted by id, so (i, j) order is the ids' order.
	slices.SortFunc(pairs, func(p, q pair) int {
		return cmp.Or(cmp.Compare(q.sim, p.sim), cmp.Compare(p.i, q.i), cmp.Compare(p.j, q.j))
	})

	used := make([]bool, len(recs))
	var plan []Action
	for _, p := range pairs {
		if used[p.i] || used[p.j] {
			continue
		}
		used[p.i], used[p.j] = true, true
		a, b := recs[p.i], recs[p.j]
		kind := ActionSeparate
		if p.sim >= th.Merge && HardRulesPass(a, b, th) {
			kind = ActionMerge
		}
		plan = append(plan, Action{Kind: kind, A: a, B: b, Similarity: p.sim})
	}
	return plan
}

// separated reports whether a and b were separated from each other before. Both
// must say so: a run that stopped after rewriting only one of them redoes the pair.
func separated(a, b vectorstore.Record) bool {
	return slices.Contains(records.StringList(a.Metadata[records.MetaSeparatedFromIDs]), b.ID) &&
		slices.Contains(records.StringList(b.Metadata[records.MetaSeparatedFromIDs]), a.ID)
}

// MergedRecord is the record that replaces a and b (SPEC C6): id deterministic
// from both ids, the earliest time with its chat (on equal times, the smaller
// id's), a's speaker, the summed hit
// counts, the union of both source chats and merged ids (their own included), and
// both update histories. Other metadata fields are kept, the earlier record's
// winning a conflict.
func MergedRecord(a, b vectorstore.Record, text string, vec []float32) vectorstore.Record {
	first, second := a, b
	if b.TS.Before(a.TS) || (b.TS.Equal(a.TS) && b.ID < a.ID) {
		first, second = b, a
	}
	md := make(map[string]any, len(first.Metadata)+len(second.Metadata)+8)
	for k, v := range second.Metadata {
		md[k] = v
	}
	for k, v := range first.Metadata {
		md[k] = v
	}
	md[records.MetaThing] = text
	md[records.MetaTime] = records.FormatTime(first.TS)
	md[records.MetaChatID] = first.ChatID
	md[records.MetaWho] = a.Who
	md[records.MetaUpdates] = append(records.AnyList(first.Metadata[records.MetaUpdates]), records.AnyList(second.Metadata[records.MetaUpdates])...)
	md[records.MetaSourceChatIDs] = records.ToAnyList(union([]string{a.ChatID, b.ChatID},
		records.StringList(a.Metadata[records.MetaSourceChatIDs]), records.StringList(b.Metadata[records.MetaSourceChatIDs])))
	md[records.MetaMergedFromIDs] = records.ToAnyList(union([]string{a.ID, b.ID},
		records.StringList(a.Metadata[records.MetaMergedFromIDs]), records.StringList(b.Metadata[records.MetaMergedFromIDs])))
	if sep := union(records.StringList(a.Metadata[records.MetaSeparatedFromIDs]), records.StringList(b.Metadata[records.MetaSeparatedFromIDs])); len(sep) > 0 {
		md[records.MetaSeparatedFromIDs] = records.ToAnyList(sep)
	}
	if _, ok := md[records.MetaContext]; !ok {
		md[records.MetaContext] = "merged memory"
	}

	lo, hi := min(a.ID, b.ID), max(a.ID, b.ID)
	m := first
	m.ID = vectorstore.DeterministicID("merge", lo, hi)
	m.Who = a.Who
	m.Text = text
	m.Vector = vec
	m.HitCount = a.HitCount + b.HitCount
	m.Confidence = max(a.Confidence, b.Confidence)
	m.ExpiresAt = laterExpiry(a.ExpiresAt, b.ExpiresAt)
	m.Metadata = md
	return m
}

// laterExpiry keeps the merged memory as long as either original would have
// lived; the zero time means never.
func laterExpiry(a, b time.Time) time.Time {
	if a.IsZero() || b.IsZero() {
		return time.Time{}
	}
	if a.After(b) {
		return a
	}
	return b
}

// union returns the sorted distinct non-empty strings of all lists.
func union(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
