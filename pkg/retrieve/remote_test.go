package retrieve

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// With a remote embedder the recall runs beside the pack's other reads, and the
// pack is the one built with them one after the other.
func TestContextPackWithRecallBesideTheReads(t *testing.T) {
	r := newRig(t)
	r.write("u1", "MEMORY.md", "# Memory\n\nThe invoice template lives in finance/invoices.xlsx.\n")
	r.write("u1", "file_patterns.md", "Sales files: columns date, product, qty.\n")
	r.observe("u1", "s1", "Where is my sales file?", nil)
	r.memory("u1", vectorstore.Episodic, "My sister Ana lives in Porto.", nil, nil)
	r.memory("u1", vectorstore.Semantic, "User: the sales files have columns date, product and qty.", nil, nil)
	req := events.ContextRequest{UserID: "u1", SessionID: "s1", Query: "where does my sister live, and my sales files?"}
	packs := make([]string, 2)
	for i, remote := range []bool{false, true} {
		svc, err := New(Config{RemoteEmbedder: remote}, r.deps(), nil)
		must(t, err)
		pack, err := svc.contextPack(context.Background(), tenant, req)
		must(t, err)
		if pack.Core == nil || len(pack.EpisodicItems) == 0 || len(pack.SemanticItems) == 0 || len(pack.RecentEvents) == 0 {
			t.Fatalf("remote embedder %v: pack lacks core, recall or session: %+v", remote, pack)
		}
		// The scores age with the wall clock between the two packs.
		for _, items := range [][]events.PackItem{pack.EpisodicItems, pack.SemanticItems} {
			for j := range items {
				items[j].Score = 0
			}
		}
		data, err := json.Marshal(pack)
		must(t, err)
		packs[i] = string(data)
	}
	if packs[0] != packs[1] {
		t.Fatalf("pack with the recall beside the reads\n%s\nwith them one after the other\n%s", packs[1], packs[0])
	}
}
