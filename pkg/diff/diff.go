// Package diff compares two memories of one (tenant, user): the live one and a
// replay's, or two replays' (SPEC E6). Markdown files are compared as text and
// shown as unified diffs; vector memories are matched by record id (ids derive from
// the source event, so the same observation gives the same id in both), then by
// text, and reported as added, removed or changed, naming what changed.
package diff

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/transfer"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Memory is a vector memory as compared: what a worker decided, not when it ran.
type Memory struct {
	ID             string   `json:"id"`
	Type           string   `json:"memory_type"`
	Text           string   `json:"text"`
	Scope          string   `json:"scope,omitempty"`
	Kind           string   `json:"kind,omitempty"`
	Key            string   `json:"key,omitempty"`
	Context        string   `json:"context,omitempty"`
	SourceEventIDs []string `json:"source_event_ids,omitempty"`
}

// Snapshot is one side of a comparison.
type Snapshot struct {
	Files    map[string]string // Markdown file name → content
	Memories []Memory
}

// skipped reports files that record when something ran, not what the memory is:
// backups, policy snapshots and the markers beside them.
func skipped(name string) bool {
	base := name[strings.LastIndex(name, "/")+1:]
	return strings.HasPrefix(name, "backups/") || strings.HasPrefix(name, "policy_snapshots/") || strings.HasPrefix(base, ".")
}

// Take reads the snapshot of (tenant, user) from docs and vectors.
func Take(ctx context.Context, docs *docstore.Store, vectors vectorstore.Store, tenant, user string) (Snapshot, error) {
	ns := docstore.Namespace{Tenant: tenant, User: user}
	s := Snapshot{Files: map[string]string{}}
	names, err := docs.Files(ctx, ns)
	if err != nil {
		return s, fmt.Errorf("diff: files of %s/%s: %w", tenant, user, err)
	}
	for _, name := range names {
		if skipped(name) {
			continue
		}
		data, err := docs.ReadFile(ctx, ns, name)
		if err != nil {
			return s, fmt.Errorf("diff: read %s: %w", name, err)
		}
		s.Files[name] = string(data)
	}
	offset := ""
	for {
		recs, next, err := vectors.Scroll(ctx, vectorstore.Filter{Tenant: tenant, UserID: user}, offset, 256)
		if err != nil {
			return s, fmt.Errorf("diff: memories of %s/%s: %w", tenant, user, err)
		}
		for _, r := range recs {
			s.Memories = append(s.Memories, memoryOf(r.ID, string(r.MemoryType), r.Text, r.Scope, r.Kind, r.Key, r.Metadata))
		}
		if next == "" {
			return s, nil
		}
		offset = next
	}
}

// FromArchive reads the snapshot of user from an archive of `agentmem export`
// (pkg/transfer): the live side of a comparison while the live stack runs, read
// through the retriever instead of the stores one process owns.
func FromArchive(r io.Reader, user string) (Snapshot, error) {
	s := Snapshot{Files: map[string]string{}}
	_, err := transfer.Read(r, func(e transfer.Entry) error {
		switch {
		case e.User != user:
		case e.File != nil && !skipped(e.File.Name):
			s.Files[e.File.Name] = string(e.File.Data)
		case e.Record != nil:
			rec := e.Record
			s.Memories = append(s.Memories, memoryOf(rec.ID, string(rec.MemoryType), rec.Text, rec.Scope, rec.Kind, rec.Key, rec.Metadata))
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("diff: archive of %s: %w", user, err)
	}
	return s, nil
}

func memoryOf(id, memoryType, text, scope, kind, key string, meta map[string]any) Memory {
	ctxText, _ := meta[records.MetaContext].(string)
	return Memory{
		ID: id, Type: memoryType, Text: text, Scope: scope, Kind: kind, Key: key,
		Context: ctxText, SourceEventIDs: records.StringList(meta[records.MetaSourceEventIDs]),
	}
}

// FileDiff is one Markdown file that differs; Unified is its unified diff.
type FileDiff struct {
	File    string `json:"file"`
	Status  string `json:"status"` // added, removed, changed
	Unified string `json:"unified"`
}

// Change is a memory present on both sides with different content.
type Change struct {
	Before Memory   `json:"before"`
	After  Memory   `json:"after"`
	Fields []string `json:"fields"`
}

// Result is the difference from A (the live memory, or the first replay) to B.
type Result struct {
	A, B    string     `json:"-"`
	Files   []FileDiff `json:"files"`
	Added   []Memory   `json:"added"`
	Removed []Memory   `json:"removed"`
	Changed []Change   `json:"changed"`
}

// Empty reports no difference at all.
func (r Result) Empty() bool {
	return len(r.Files) == 0 && len(r.Added) == 0 && len(r.Removed) == 0 && len(r.Changed) == 0
}

// Compare returns the difference from a to b; nameA and nameB label the sides.
func Compare(nameA string, a Snapshot, nameB string, b Snapshot) Result {
	r := Result{A: nameA, B: nameB, Files: []FileDiff{}, Added: []Memory{}, Removed: []Memory{}, Changed: []Change{}}
	names := map[string]bool{}
	for n := range a.Files {
		names[n] = true
	}
	for n := range b.Files {
		names[n] = true
	}
	for _, n := range sortedKeys(names) {
		x, inA := a.Files[n]
		y, inB := b.Files[n]
		if inA && inB && x == y {
			continue
		}
		status := "changed"
		switch {
		case !inA:
			status = "added"
		case !inB:
			status = "removed"
		}
		r.Files = append(r.Files, FileDiff{File: n, Status: status, Unified: Unified(nameA+"/"+n, nameB+"/"+n, x, y, 3)})
	}

	byID := map[string]Memory{}
	for _, m := range b.Memories {
		byID[m.ID] = m
	}
	var onlyA []Memory
	for _, m := range a.Memories {
		o, ok := byID[m.ID]
		if !ok {
			onlyA = append(onlyA, m)
			continue
		}
		delete(byID, m.ID)
		if f := changed(m, o); len(f) > 0 {
			r.Changed = append(r.Changed, Change{Before: m, After: o, Fields: f})
		}
	}
	// Different ids, same content and provenance: the same memory (an id from the
	// write time, say), not a change.
	byContent := map[string][]Memory{}
	for _, m := range byID {
		byContent[contentKey(m)] = append(byContent[contentKey(m)], m)
	}
	for _, m := range onlyA {
		k := contentKey(m)
		if l := byContent[k]; len(l) > 0 {
			byContent[k] = l[1:]
			continue
		}
		r.Removed = append(r.Removed, m)
	}
	for _, l := range byContent {
		r.Added = append(r.Added, l...)
	}
	sort.Slice(r.Added, func(i, j int) bool { return r.Added[i].ID < r.Added[j].ID })
	sort.Slice(r.Removed, func(i, j int) bool { return r.Removed[i].ID < r.Removed[j].ID })
	sort.Slice(r.Changed, func(i, j int) bool { return r.Changed[i].Before.ID < r.Changed[j].Before.ID })
	return r
}

func contentKey(m Memory) string {
	return strings.Join([]string{m.Type, m.Scope, m.Kind, m.Key, m.Text, strings.Join(m.SourceEventIDs, ",")}, "\x00")
}

func changed(a, b Memory) []string {
	var f []string
	if a.Type != b.Type {
		f = append(f, "memory_type")
	}
	if a.Text != b.Text {
		f = append(f, "text")
	}
	if a.Scope != b.Scope || a.Kind != b.Kind || a.Key != b.Key {
		f = append(f, "address")
	}
	if a.Context != b.Context {
		f = append(f, "context")
	}
	if !slices.Equal(a.SourceEventIDs, b.SourceEventIDs) {
		f = append(f, "source_event_ids")
	}
	return f
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Unified is the unified diff of a and b with n lines of context (lifecycle.Diff's
// line diff, grouped into hunks); "" when they are equal.
func Unified(nameA, nameB, a, b string, n int) string {
	if a == b {
		return ""
	}
	type line struct {
		op   byte // ' ', '-', '+'
		text string
	}
	var ls []line
	for _, l := range strings.Split(strings.TrimSuffix(lifecycle.Diff(a, b), "\n"), "\n") {
		if len(l) < 2 {
			continue
		}
		op := l[0]
		ls = append(ls, line{op: op, text: l[2:]})
	}
	// Within each run of changed lines, removals first, as diff -u prints them.
	for i := 0; i < len(ls); {
		j := i
		for j < len(ls) && ls[j].op != ' ' {
			j++
		}
		if j == i {
			i++
			continue
		}
		sort.SliceStable(ls[i:j], func(x, y int) bool { return ls[i+x].op == '-' && ls[i+y].op == '+' })
		i = j
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	for i := 0; i < len(ls); {
		if ls[i].op == ' ' {
			i++
			continue
		}
		start := max(0, i-n)
		end := i
		for end < len(ls) {
			if ls[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ls) && ls[run].op == ' ' {
				run++
			}
			if run == len(ls) || run-end > 2*n {
				end = min(len(ls), end+n)
				break
			}
			end = run
		}
		aStart, bStart := 1, 1
		for _, l := range ls[:start] {
			if l.op != '+' {
				aStart++
			}
			if l.op != '-' {
				bStart++
			}
		}
		aLen, bLen := 0, 0
		for _, l := range ls[start:end] {
			if l.op != '+' {
				aLen++
			}
			if l.op != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", aStart, aLen, bStart, bLen)
		for _, l := range ls[start:end] {
			out.WriteByte(l.op)
			out.WriteString(l.text)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

// Write prints r for a person: the unified diffs, then the memories.
func (r Result) Write(w io.Writer) error {
	var b strings.Builder
	for _, f := range r.Files {
		b.WriteString(f.Unified)
	}
	for _, m := range r.Removed {
		fmt.Fprintf(&b, "- memory %s %s %q (from %s)\n", m.ID, m.Type, clip(m.Text), strings.Join(m.SourceEventIDs, ","))
	}
	for _, m := range r.Added {
		fmt.Fprintf(&b, "+ memory %s %s %q (from %s)\n", m.ID, m.Type, clip(m.Text), strings.Join(m.SourceEventIDs, ","))
	}
	for _, c := range r.Changed {
		fmt.Fprintf(&b, "~ memory %s %s: %s changed\n  - %q\n  + %q\n", c.Before.ID, c.Before.Type, strings.Join(c.Fields, ", "), clip(c.Before.Text), clip(c.After.Text))
	}
	if r.Empty() {
		fmt.Fprintf(&b, "no difference between %s and %s\n", r.A, r.B)
	} else {
		fmt.Fprintf(&b, "%d files, %d memories added, %d removed, %d changed\n", len(r.Files), len(r.Added), len(r.Removed), len(r.Changed))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
