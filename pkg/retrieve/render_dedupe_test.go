package retrieve

import (
	"testing"

	"github.com/agentmem/agentmem/events"
)

// No entry is in a pack twice: a chunk the core holds, and a text two lists share.
func TestDedupeAcrossSections(t *testing.T) {
	entry := "### [2026-03-02 09:03] error_solution\n\nError: KeyError: 'Date'. Fix: use order_date."
	pack := events.ContextPack{
		Core:          &events.PackItem{Text: "# Memory\n\n" + entry + "\n\n---\n"},
		Chunks:        []events.PackItem{{ID: "MEMORY.md#L3-5", Text: entry}, {ID: "MEMORY.md#L9-9", Text: "other note"}},
		SemanticItems: []events.PackItem{{ID: "f1", Text: "User's files have columns a, b."}},
		EpisodicItems: []events.PackItem{{ID: "e1", Text: "user's files have columns a b"}, {ID: "e2", Text: "new"}},
	}
	dedupe(&pack)
	if len(pack.Chunks) != 1 || pack.Chunks[0].ID != "MEMORY.md#L9-9" {
		t.Errorf("chunks %+v, want only the one the core does not hold", pack.Chunks)
	}
	if len(pack.EpisodicItems) != 1 || pack.EpisodicItems[0].ID != "e2" {
		t.Errorf("episodes %+v, want only e2", pack.EpisodicItems)
	}
}
