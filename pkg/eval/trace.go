package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/agentmem/agentmem/events"
)

// traceItems is how many of the default pack's ranked items a trace shows.
const traceItems = 10

// QuestionTrace is one question as `eval locomo --questions` writes it: enough to
// see why evidence was missed without re-running the evaluation.
type QuestionTrace struct {
	SampleID string `json:"sample_id"`
	Question string `json:"question"`
	Category string `json:"category"`
	// Evidence are the usable evidence turns as "Speaker: text", keyed by dia id.
	Evidence map[string]string `json:"evidence"`
	// RecallAt10 is the default pack's recall@10 of the question, 0–1; -1 when the
	// question has no usable evidence.
	RecallAt10 float64 `json:"recall_at_10"`
	// Items are the default pack's first ranked items (PackItems order).
	Items []TraceItem `json:"items"`
	// EvidenceRanks are, by dia id, the rank (from 1) of the first item holding
	// the turn in the unbudgeted pack; absent: no item of it holds the turn.
	EvidenceRanks map[string]int `json:"evidence_ranks"`
}

// TraceItem is one ranked item of a pack.
type TraceItem struct {
	Kind   string   `json:"kind"`
	Score  float64  `json:"score"`
	DiaIDs []string `json:"dia_ids"`
	Text   string   `json:"text"`
	// Context is an episode's earlier messages, shown apart from its text.
	Context []string `json:"context,omitempty"`
}

func writeTrace(w io.Writer, c Conversation, q Question, evidence []string, pack, unbudgeted events.ContextPack) error {
	turns := map[string]Turn{}
	for _, t := range c.Turns() {
		turns[t.DiaID] = t
	}
	tr := QuestionTrace{SampleID: c.SampleID, Question: q.Text, Category: q.Category.String(), Evidence: map[string]string{}, RecallAt10: -1}
	for _, id := range evidence {
		tr.Evidence[id] = turns[id].Line()
	}
	ranked := rankedPackItems(pack)
	items := PackItems(pack)
	if r, ok := RecallAtK(evidence, items, traceItems); ok {
		tr.RecallAt10 = r
	}
	for i, it := range ranked[:min(traceItems, len(ranked))] {
		tr.Items = append(tr.Items, TraceItem{Kind: string(it.Kind), Score: it.Score, DiaIDs: items[i].DiaIDs, Text: it.Text, Context: it.Context})
	}
	tr.EvidenceRanks = map[string]int{}
	for i, it := range PackItems(unbudgeted) {
		for _, id := range it.DiaIDs {
			if _, ok := tr.Evidence[id]; ok && tr.EvidenceRanks[id] == 0 {
				tr.EvidenceRanks[id] = i + 1
			}
		}
	}
	b, err := json.Marshal(tr)
	if err != nil {
		return fmt.Errorf("eval: trace: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// rankedPackItems are a pack's ranked items in PackItems order.
func rankedPackItems(p events.ContextPack) []events.PackItem {
	vec := slices.Concat(p.EpisodicItems, p.SemanticItems)
	slices.SortStableFunc(vec, byScore)
	return slices.Concat(vec, p.Chunks)
}
