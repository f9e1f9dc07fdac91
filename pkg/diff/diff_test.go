package diff

import (
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	a := Snapshot{Files: map[string]string{"MEMORY.md": "a\nb\nc\n", "same.md": "x\n"}, Memories: []Memory{
		{ID: "1", Type: "episodic", Text: "t1", SourceEventIDs: []string{"e1"}},
		{ID: "2", Type: "episodic", Text: "t2", SourceEventIDs: []string{"e0", "e2"}},
		{ID: "3", Type: "semantic", Text: "gone"},
		{ID: "4", Type: "semantic", Text: "same content, other id"},
	}}
	b := Snapshot{Files: map[string]string{"MEMORY.md": "a\nB\nc\n", "same.md": "x\n", "new.md": "n\n"}, Memories: []Memory{
		{ID: "1", Type: "episodic", Text: "t1", SourceEventIDs: []string{"e1"}},
		{ID: "2", Type: "episodic", Text: "t2", SourceEventIDs: []string{"e2"}},
		{ID: "5", Type: "semantic", Text: "new"},
		{ID: "6", Type: "semantic", Text: "same content, other id"},
	}}
	r := Compare("live", a, "r", b)
	if len(r.Files) != 2 || r.Files[0].File != "MEMORY.md" || r.Files[1].Status != "added" {
		t.Fatalf("files %+v", r.Files)
	}
	if want := "--- live/MEMORY.md\n+++ r/MEMORY.md\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"; r.Files[0].Unified != want {
		t.Fatalf("unified:\n%s\nwant:\n%s", r.Files[0].Unified, want)
	}
	if len(r.Changed) != 1 || r.Changed[0].Before.ID != "2" || strings.Join(r.Changed[0].Fields, ",") != "source_event_ids" {
		t.Fatalf("changed %+v", r.Changed)
	}
	if len(r.Removed) != 1 || r.Removed[0].ID != "3" || len(r.Added) != 1 || r.Added[0].ID != "5" {
		t.Fatalf("removed %+v added %+v", r.Removed, r.Added)
	}
	if r.Empty() || !Compare("a", a, "b", a).Empty() {
		t.Fatal("Empty is wrong")
	}
}
