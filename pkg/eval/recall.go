package eval

import (
	"cmp"
	"slices"
	"unicode/utf8"

	"github.com/agentmem/agentmem/events"
)

// Item is one retrieved item as recall sees it: the dia ids of the turns it came
// from (none for an item without provenance, which still takes its rank).
type Item struct {
	DiaIDs []string
	// Tokens is the item's text length in tokens, estimated as retrieve does: runes / 4,
	// rounded up.
	Tokens int
}

// RecallAtK is the fraction of evidence found among the dia ids of the first k
// items: |evidence ∩ ids(items[:k])| / |evidence|. Empty evidence has no recall
// (ok false); the caller excludes such questions.
func RecallAtK(evidence []string, items []Item, k int) (recall float64, ok bool) {
	if len(evidence) == 0 {
		return 0, false
	}
	found := map[string]bool{}
	for _, it := range items[:min(k, len(items))] {
		for _, id := range it.DiaIDs {
			found[id] = true
		}
	}
	hit := 0
	for _, id := range evidence {
		if found[id] {
			hit++
		}
	}
	return float64(hit) / float64(len(evidence)), true
}

// PackItems orders a context pack's items for recall@k: the vector memories
// (episodic and semantic together) by score, best first, ties by id, as the
// retriever's recall ranked them before splitting them by type; then the keyword
// chunks of MEMORY.md in their order. Core memory, topics, daily notes and memory
// items are not ranked results and are not counted. An item contributes the
// "dia_id" values of its provenance meta, and the tokens of its text and context.
func PackItems(p events.ContextPack) []Item {
	ranked := rankedPackItems(p)
	out := make([]Item, 0, len(ranked))
	for _, it := range ranked {
		out = append(out, Item{DiaIDs: provenanceDiaIDs(it.Source), Tokens: estimateTokens(it.Text) + contextTokens(it.Context)})
	}
	return out
}

// contextTokens are the tokens of an item's context, which the pack shows with
// it (an episode's earlier messages).
func contextTokens(context []string) int {
	n := 0
	for _, l := range context {
		n += estimateTokens(l)
	}
	return n
}

// byScore orders pack items best first, ties by id.
func byScore(a, b events.PackItem) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// PackTokensAtK estimates the token_estimate of a pack of packTokens trimmed to
// its first k ranked items (items as PackItems orders them): every later item is
// taken out with its text's tokens plus one for its rendering (a "- " bullet and a
// blank line). Never below zero.
func PackTokensAtK(packTokens int, items []Item, k int) int {
	for _, it := range items[min(k, len(items)):] {
		packTokens -= it.Tokens + 1
	}
	return max(packTokens, 0)
}

// RecallAtTokens is the fraction of evidence found among the dia ids of the
// items taken in order while their tokens add up to at most budget: recall at
// equal cost, whatever the items' lengths. Empty evidence has no recall (ok false).
func RecallAtTokens(evidence []string, items []Item, budget int) (recall float64, ok bool) {
	n, used := 0, 0
	for n < len(items) && used+items[n].Tokens <= budget {
		used += items[n].Tokens
		n++
	}
	return RecallAtK(evidence, items, n)
}

// provenanceDiaIDs collects the dia ids of a provenance, in order, once each.
func provenanceDiaIDs(p events.Provenance) []string {
	var ids []string
	for _, m := range p.Meta {
		if id, ok := m[MetaDiaID].(string); ok && id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// estimateTokens is the retriever's token estimate (pkg/retrieve render): runes / 4,
// rounded up.
func estimateTokens(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }
