package retrieve

import (
	"slices"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// searchRig has two episodes and a fact matching "sales file columns" well, a
// fact matching it by one word, and an episode sharing nothing with it.
func searchRig(t *testing.T, cfg Config) (*rig, map[string]string) {
	r := newRig(t)
	r.start(cfg)
	ids := map[string]string{
		"ep1":     r.memory("u1", vectorstore.Episodic, "The user's sales file has the columns date, product and qty", nil, nil),
		"ep2":     r.memory("u1", vectorstore.Episodic, "The user said the sales file columns are renamed every quarter", nil, nil),
		"sem":     r.memory("u1", vectorstore.Semantic, "Sales file columns: date, product, qty", nil, nil),
		"weak":    r.memory("u1", vectorstore.Semantic, "Prefers files sent as zip archives", nil, nil),
		"hiking":  r.memory("u1", vectorstore.Episodic, "The user went hiking in the Alps with Marta", nil, nil),
		"holiday": r.memory("u1", vectorstore.Semantic, "Vacation days are booked in March", nil, nil),
	}
	return r, ids
}

func idsOf(rs []events.SearchResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// Search answers one list, best first by the re-ranker's score, whatever the
// types (the tool description promises it); each kind keeps its own K when the
// request sets no limit (SPEC C4).
func TestSearchIsOneListBestFirst(t *testing.T) { // SPEC A10, C2, C4
	r, ids := searchRig(t, Config{KEpisodic: 2, KSemantic: 2})
	r.write("u1", "MEMORY.md", "## 2026-11-01\n\nThe sales file is exported on Mondays.\n\n## 2026-11-02\n\nThe dog is called Rex.\n")
	got := ok[events.SearchReply](t, r.call(events.EndpointSearch, events.SearchRequest{UserID: "u1", Query: "sales file columns"}))
	for i := 1; i < len(got.Results); i++ {
		if got.Results[i].Score > got.Results[i-1].Score {
			t.Fatalf("result %d scores %v after %v: %+v", i, got.Results[i].Score, got.Results[i-1].Score, got.Results)
		}
	}
	kinds := map[events.MemoryType]int{}
	for _, res := range got.Results {
		kinds[res.MemoryType]++
		// A chunk's score is its BM25 over the best chunk's, the vector
		// memories' scale, not raw BM25, which would put every chunk first.
		if res.MemoryType == events.MemoryMarkdown && (res.Score > 1 || res.Score <= 0 || res.ID == "") {
			t.Errorf("markdown hit %+v scores outside (0, 1]", res)
		}
	}
	if kinds[events.MemoryEpisodic] != 2 || kinds[events.MemorySemantic] != 2 || kinds[events.MemoryMarkdown] != 1 {
		t.Fatalf("%v of each kind, want 2 episodic and 2 semantic (K) and the chunk: %v", kinds, idsOf(got.Results))
	}
	if top := idsOf(got.Results[:3]); !slices.Contains(top, ids["ep1"]) || !slices.Contains(top, ids["ep2"]) || !slices.Contains(top, ids["sem"]) {
		t.Fatalf("the three good matches are not first: %v (ids %v)", idsOf(got.Results), ids)
	}
}

// search.min_score leaves out what scores below it, in search and in the
// context pack's vector memories: a query about nothing the user said finds
// nothing, a good match is still found.
func TestMinScoreFloor(t *testing.T) {
	r, ids := searchRig(t, Config{MinScore: 0.3})
	none := ok[events.SearchReply](t, r.call(events.EndpointSearch, events.SearchRequest{UserID: "u1", Query: "quantum chromodynamics lecture"}))
	if len(none.Results) != 0 {
		t.Fatalf("unrelated query found %+v", none.Results)
	}
	pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: "quantum chromodynamics lecture"}))
	if n := len(pack.EpisodicItems) + len(pack.SemanticItems); n != 0 {
		t.Fatalf("unrelated query packed %d vector memories: %+v %+v", n, pack.EpisodicItems, pack.SemanticItems)
	}
	got := ok[events.SearchReply](t, r.call(events.EndpointSearch, events.SearchRequest{UserID: "u1", Query: "sales file columns"}))
	if found := idsOf(got.Results); !slices.Contains(found, ids["ep1"]) || !slices.Contains(found, ids["sem"]) || slices.Contains(found, ids["hiking"]) || slices.Contains(found, ids["holiday"]) {
		t.Fatalf("search with a floor found %v (ids %v)", found, ids)
	}
	pack = ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: "sales file columns"}))
	if len(pack.EpisodicItems) == 0 || pack.EpisodicItems[0].ID != ids["ep1"] && pack.EpisodicItems[0].ID != ids["ep2"] {
		t.Fatalf("pack with a floor: %+v", pack.EpisodicItems)
	}
	for _, it := range append(pack.EpisodicItems, pack.SemanticItems...) {
		if it.ID == ids["hiking"] || it.ID == ids["holiday"] || it.Score < 0.3 {
			t.Fatalf("pack holds %+v below the floor", it)
		}
	}

	// 0 keeps today's behaviour: the unrelated query finds the least unrelated.
	r0, _ := searchRig(t, Config{})
	if all := ok[events.SearchReply](t, r0.call(events.EndpointSearch, events.SearchRequest{UserID: "u1", Query: "quantum chromodynamics lecture"})); len(all.Results) == 0 {
		t.Fatal("without a floor the unrelated query found nothing")
	}
}
