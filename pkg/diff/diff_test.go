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

// SPEC E6: a memory whose only difference is one field is Changed, naming
// exactly that field: a replay under another configuration that only rewrote
// a memory's context must not look identical.
func TestCompareNamesEachChangedField(t *testing.T) {
	base := Memory{ID: "m1", Type: "episodic", Text: "t", Scope: "user", Kind: "fact", Key: "k", Context: "c", SourceEventIDs: []string{"e1"}}
	for _, c := range []struct {
		field string
		edit  func(*Memory)
	}{
		{"memory_type", func(m *Memory) { m.Type = "semantic" }},
		{"text", func(m *Memory) { m.Text = "t2" }},
		{"address", func(m *Memory) { m.Scope = "agent" }},
		{"address", func(m *Memory) { m.Kind = "preference" }},
		{"address", func(m *Memory) { m.Key = "k2" }},
		{"context", func(m *Memory) { m.Context = "c2" }},
		{"source_event_ids", func(m *Memory) { m.SourceEventIDs = []string{"e2"} }},
	} {
		after := base
		c.edit(&after)
		r := Compare("a", Snapshot{Memories: []Memory{base}}, "b", Snapshot{Memories: []Memory{after}})
		if len(r.Changed) != 1 || r.Changed[0].Before.ID != "m1" || strings.Join(r.Changed[0].Fields, ",") != c.field {
			t.Fatalf("%s changed: %+v (added %v, removed %v)", c.field, r.Changed, r.Added, r.Removed)
		}
	}
}
