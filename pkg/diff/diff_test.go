package diff

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/transfer"
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

// Unified groups changes into hunks as diff -u does (the expectations are GNU
// diff -U's output, with the line count always written): n lines of context,
// hunks whose gap is at most 2n lines merged, line numbers counted on each side.
func TestUnifiedHunks(t *testing.T) {
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	a := lines("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12")
	for _, c := range []struct {
		name string
		b    string
		n    int
		want string
	}{
		{"far apart: two hunks", lines("1", "X", "3", "4", "5", "6", "7", "8", "9", "10", "Y", "12"), 1,
			"@@ -1,3 +1,3 @@\n 1\n-2\n+X\n 3\n@@ -10,3 +10,3 @@\n 10\n-11\n+Y\n 12\n"},
		{"a gap of 2n: one hunk", lines("1", "X", "3", "4", "Y", "6", "7", "8", "9", "10", "11", "12"), 1,
			"@@ -1,6 +1,6 @@\n 1\n-2\n+X\n 3\n 4\n-5\n+Y\n 6\n"},
		{"a gap of 2n+1: two hunks", lines("1", "X", "3", "4", "5", "Y", "7", "8", "9", "10", "11", "12"), 1,
			"@@ -1,3 +1,3 @@\n 1\n-2\n+X\n 3\n@@ -5,3 +5,3 @@\n 5\n-6\n+Y\n 7\n"},
		{"a gap under 2n with n = 3: one hunk", lines("1", "X", "3", "4", "5", "Y", "7", "8", "9", "10", "11", "12"), 3,
			"@@ -1,9 +1,9 @@\n 1\n-2\n+X\n 3\n 4\n 5\n-6\n+Y\n 7\n 8\n 9\n"},
		{"a removal shifts the new side's numbers", lines("1", "3", "4", "5", "6", "7", "8", "9", "10", "new", "11", "12"), 1,
			"@@ -1,3 +1,2 @@\n 1\n-2\n 3\n@@ -10,2 +9,3 @@\n 10\n+new\n 11\n"},
		{"at both ends", lines("X", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"), 2,
			"@@ -1,2 +1,3 @@\n+X\n 1\n 2\n@@ -10,3 +11,2 @@\n 10\n 11\n-12\n"},
	} {
		got := Unified("a", "b", a, c.b, c.n)
		if want := "--- a\n+++ b\n" + c.want; got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, got, want)
		}
	}
	// A run of changed lines prints its removals first, in their order.
	if got, want := Unified("a", "b", "a\nb\nc\nd\n", "a\nB\nC\nD\nd\n", 1), "--- a\n+++ b\n@@ -1,4 +1,5 @@\n a\n-b\n-c\n+B\n+C\n+D\n d\n"; got != want {
		t.Errorf("a run of changes:\n%s\nwant:\n%s", got, want)
	}
	// Empty lines are lines: as context and as an addition.
	if got, want := Unified("a", "b", "a\n\nb\n", "a\n\nc\n\n", 3), "--- a\n+++ b\n@@ -1,3 +1,4 @@\n a\n \n-b\n+c\n+\n"; got != want {
		t.Errorf("empty lines:\n%s\nwant:\n%s", got, want)
	}
	if got := Unified("a", "b", a, a, 3); got != "" {
		t.Errorf("equal texts: %q, want no diff", got)
	}
}

// Write prints the file diffs, then each memory removed, added and changed, and
// a count; a memory's text on one line, clipped at 100 bytes.
func TestWrite(t *testing.T) {
	long := strings.Repeat("x", 100)
	r := Result{A: "live", B: "r",
		Files:   []FileDiff{{File: "MEMORY.md", Status: "changed", Unified: "--- live/MEMORY.md\n+++ r/MEMORY.md\n"}},
		Removed: []Memory{{ID: "1", Type: "episodic", Text: "gone\n  for\tgood", SourceEventIDs: []string{"e1", "e2"}}},
		Added:   []Memory{{ID: "2", Type: "semantic", Text: long + "y"}},
		Changed: []Change{{Before: Memory{ID: "3", Type: "episodic", Text: long}, After: Memory{ID: "3", Text: "b"}, Fields: []string{"text", "context"}}},
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "--- live/MEMORY.md\n+++ r/MEMORY.md\n" +
		"- memory 1 episodic \"gone for good\" (from e1,e2)\n" +
		"+ memory 2 semantic \"" + long + "…\" (from )\n" +
		"~ memory 3 episodic: text, context changed\n  - \"" + long + "\"\n  + \"b\"\n" +
		"1 files, 1 memories added, 1 removed, 1 changed\n"
	if b.String() != want {
		t.Fatalf("Write:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (Result{A: "live", B: "r"}).Write(&b); err != nil || b.String() != "no difference between live and r\n" {
		t.Fatalf("empty Write: %q %v", b.String(), err)
	}
}

// FromArchive takes one user's files and memories from an export: not the
// other users', nor the files that record when something ran (backups, policy
// snapshots, dot files); a memory keeps its context and source events.
func TestFromArchive(t *testing.T) {
	var buf bytes.Buffer
	w := transfer.NewWriter(&buf, "acme", events.EmbedderInfo{Model: "m", Dimensions: 1}, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	write := func(user string, files map[string]string, recs ...events.Record) {
		t.Helper()
		if err := w.User(user); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := w.File(name, []byte(data)); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range recs {
			if err := w.Record(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("u0", map[string]string{"MEMORY.md": "other user\n"}, events.Record{ID: "r0", MemoryType: "semantic", Text: "other", Vector: []float32{1}})
	write("u1", map[string]string{
		"MEMORY.md": "mine\n", "202611/20261128.md": "today\n",
		"backups/20261128_100000_MEMORY.md": "old\n", "policy_snapshots/20261128_100000.json": "{}", ".last_longterm_compress": "stamp\n",
	}, events.Record{ID: "r1", MemoryType: "episodic", Text: "t", Scope: "user", Kind: "fact", Key: "k",
		Vector: []float32{1}, Metadata: map[string]any{"context": "why", "source_event_ids": []string{"e1", "e2"}}})
	write("u2", map[string]string{"MEMORY.md": "later user\n"})
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := FromArchive(bytes.NewReader(buf.Bytes()), "u1")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"MEMORY.md": "mine\n", "202611/20261128.md": "today\n"}; !reflect.DeepEqual(s.Files, want) {
		t.Fatalf("files %v, want %v", s.Files, want)
	}
	want := []Memory{{ID: "r1", Type: "episodic", Text: "t", Scope: "user", Kind: "fact", Key: "k", Context: "why", SourceEventIDs: []string{"e1", "e2"}}}
	if !reflect.DeepEqual(s.Memories, want) {
		t.Fatalf("memories %+v, want %+v", s.Memories, want)
	}
	if _, err := FromArchive(strings.NewReader("not an archive"), "u1"); err == nil || !strings.Contains(err.Error(), "archive of u1") {
		t.Fatalf("a corrupt archive: %v", err)
	}
}
