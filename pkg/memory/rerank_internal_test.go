package memory

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/wordvec"
)

// semanticRerank keeps every candidate and returns them sorted; it moves a
// candidate by no more than Weight × the best score, and a query without a
// word the table knows (another language) changes nothing.
func TestPropertySemanticRerankKeepsCandidates(t *testing.T) {
	words := wordvec.Default()
	pool := strings.Fields("guitar piano painting hiking dog cat mortgage bank invoice report 销售 报表 Melanie")
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 10).Draw(rt, "n")
		rs := make([]Ranked, n)
		for i := range rs {
			text := strings.Join(rapid.SliceOfN(rapid.SampledFrom(pool), 1, 5).Draw(rt, "text"), " ")
			rs[i] = Ranked{Record: vectorstore.Record{ID: fmt.Sprintf("m%02d", i), Text: text}, Score: rapid.Float64Range(0.01, 2).Draw(rt, "score")}
		}
		sortRanked(rs)
		before := slices.Clone(rs)
		weight := rapid.Float64Range(0.1, 3).Draw(rt, "weight")
		query := strings.Join(rapid.SliceOfN(rapid.SampledFrom(pool), 1, 3).Draw(rt, "query"), " ")
		semanticRerank(rs, query, words, weight, textTerms)
		if len(rs) != len(before) || !slices.IsSortedFunc(rs, func(a, b Ranked) int { return cmp.Compare(b.Score, a.Score) }) {
			rt.Fatalf("got %d candidates, sorted %v; want %d, sorted", len(rs), rs, len(before))
		}
		old := map[string]float64{}
		for _, r := range before {
			old[r.Record.ID] = r.Score
		}
		for _, r := range rs {
			s, ok := old[r.Record.ID]
			if !ok {
				rt.Fatalf("candidate %s appeared", r.Record.ID)
			}
			if len(before) > 0 && (math.Abs(r.Score-s) > weight*before[0].Score*(1+1e-6)) {
				rt.Fatalf("%s moved from %v to %v, more than %v × the best %v", r.Record.ID, s, r.Score, weight, before[0].Score)
			}
		}
		if !slices.ContainsFunc(strings.Fields(query), func(w string) bool { return w != "销售" && w != "报表" }) {
			for _, r := range rs {
				if r.Score != old[r.Record.ID] {
					rt.Fatalf("query %q has no known word, yet %s moved", query, r.Record.ID)
				}
			}
		}
	})
}
