package docstore_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// memBackend is a Backend in a map, so that a property can run thousands of
// writes; the filesystem variant of the property runs fewer.
type memBackend struct {
	mu    sync.Mutex
	files map[string][]byte
}

func newMemBackend() *memBackend { return &memBackend{files: map[string][]byte{}} }

func (m *memBackend) key(ns docstore.Namespace, name string) string {
	return ns.Tenant + "/" + ns.User + "/" + name
}

func (m *memBackend) Read(_ context.Context, ns docstore.Namespace, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[m.key(ns, name)]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, docstore.ErrNotFound)
	}
	return append([]byte(nil), d...), nil
}

func (m *memBackend) ReadIfChanged(ctx context.Context, ns docstore.Namespace, name string, _ docstore.Version) ([]byte, docstore.Version, bool, error) {
	d, err := m.Read(ctx, ns, name)
	return d, docstore.Version{}, true, err
}

func (m *memBackend) Update(_ context.Context, ns docstore.Namespace, name string, fn func([]byte, bool) ([]byte, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.files[m.key(ns, name)]
	data, err := fn(append([]byte(nil), old...), ok)
	if err != nil {
		return err
	}
	m.files[m.key(ns, name)] = append([]byte(nil), data...)
	return nil
}

func (m *memBackend) Put(_ context.Context, ns docstore.Namespace, name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[m.key(ns, name)] = append([]byte(nil), data...)
	return nil
}

func (m *memBackend) Delete(_ context.Context, ns docstore.Namespace, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, m.key(ns, name))
	return nil
}

func (m *memBackend) List(_ context.Context, ns docstore.Namespace, dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := m.key(ns, "")
	if dir != "" {
		prefix += dir + "/"
	}
	var out []string
	for k := range m.files {
		if strings.HasPrefix(k, prefix) {
			out = append(out, strings.TrimPrefix(k, m.key(ns, "")))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Users and DeleteNamespace complete the Backend; the property does not use them.
func (m *memBackend) Users(context.Context, string) ([]string, error) {
	return nil, errors.ErrUnsupported
}

func (m *memBackend) Tenants(context.Context) ([]string, error) {
	return nil, errors.ErrUnsupported
}

func (m *memBackend) DeleteNamespace(context.Context, docstore.Namespace) (int, error) {
	return 0, errors.ErrUnsupported
}

// TestPropertyCapacityAndBackupsOnEveryWritePath checks SPEC A7 and A8 over random
// sequences of writes on every path that appends to or overwrites MEMORY.md
// (the extractor's AppendEntries, memory_append's AppendLongTerm, Replace,
// Restore): MEMORY.md never ends a write above MaxLines, the newest entry written
// is always there whole, every overwrite leaves a backup holding exactly the
// content it replaced, and there are never more than BackupsKeep backups.
func TestPropertyCapacityAndBackupsOnEveryWritePath(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { checkCapacityAndBackups(rt, newMemBackend(), 60) })
}

// TestLongTermAppendTrimsWithBackupOnFilesystem is the property's path on disk:
// memory_append past max_lines cuts MEMORY.md, keeps the newest section and
// leaves the content before the cut in a backup; backups stay within the bound.
func TestLongTermAppendTrimsWithBackupOnFilesystem(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	s, err := docstore.New(docstore.Config{MaxLines: 20, TargetLines: 12, BackupsKeep: 2, Now: clk.Now}, newFilesystem(t, t.TempDir()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := range 30 {
		clk.Advance(time.Hour)
		last = fmt.Sprintf("fact number %d", i)
		if err := s.AppendLongTerm(ctx, acme, last); err != nil {
			t.Fatal(err)
		}
		doc, err := s.ReadFile(ctx, acme, docstore.MemoryFile)
		if err != nil {
			t.Fatal(err)
		}
		if n := markdown.CountLines(string(doc)); n > 20 || !strings.Contains(string(doc), last) {
			t.Fatalf("append %d: %d lines, newest kept %v:\n%s", i, n, strings.Contains(string(doc), last), doc)
		}
	}
	backups, err := s.Backups(ctx, acme)
	if err != nil || len(backups) != 2 {
		t.Fatalf("Backups = %v, %v; want the newest 2", backups, err)
	}
	data, err := s.ReadFile(ctx, acme, backups[1])
	if err != nil || markdown.CountLines(string(data)) <= 20 || !strings.Contains(string(data), "fact number") {
		t.Fatalf("newest backup %s = %q, %v; want the content before the last cut", backups[1], data, err)
	}
}

func checkCapacityAndBackups(rt *rapid.T, b docstore.Backend, maxOps int) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	// target_lines of at least 20 leave room for the replaced preamble and the
	// newest entry, so that keeping the newest entry whole is possible.
	maxLines := rapid.IntRange(20, 80).Draw(rt, "max_lines")
	target := rapid.IntRange(20, maxLines).Draw(rt, "target_lines")
	keep := rapid.IntRange(1, 5).Draw(rt, "backups_keep")
	s, err := docstore.New(docstore.Config{MaxLines: maxLines, TargetLines: target, BackupsKeep: keep, Now: clk.Now}, b, zap.NewNop())
	if err != nil {
		rt.Fatal(err)
	}
	read := func() string {
		d, err := s.ReadFile(ctx, acme, docstore.MemoryFile)
		if err != nil {
			return ""
		}
		return string(d)
	}
	for i := range rapid.IntRange(1, maxOps).Draw(rt, "ops") {
		clk.Advance(time.Duration(rapid.IntRange(0, 90).Draw(rt, "advance_s")) * time.Second)
		before := read()
		backupsBefore, _ := s.Backups(ctx, acme)
		text := fmt.Sprintf("fact %d %s", i, strings.Repeat("word ", rapid.IntRange(1, 30).Draw(rt, "words")))
		newest := ""
		overwrote := false
		switch op := rapid.SampledFrom([]string{"entries", "long_term", "replace", "restore"}).Draw(rt, "op"); op {
		case "entries":
			e := markdown.Entry{Time: clk.Now(), Category: markdown.CategoryGeneral, Content: text}
			res, err := s.AppendEntries(ctx, acme, []markdown.Entry{e})
			if err != nil {
				rt.Fatal(err)
			}
			newest, overwrote = markdown.FormatEntry(e), res.Dropped > 0
		case "long_term":
			if err := s.AppendLongTerm(ctx, acme, text); err != nil {
				rt.Fatal(err)
			}
			newest = markdown.FormatLongTerm(clk.Now().UTC(), text)
			overwrote = markdown.CountLines(before)+markdown.CountLines(newest) > maxLines
		case "replace":
			if _, err := s.Replace(ctx, acme, docstore.MemoryFile, []byte("# replaced\n\n"+text+"\n")); err != nil {
				rt.Fatal(err)
			}
			overwrote = before != ""
		case "restore":
			if len(backupsBefore) == 0 {
				continue
			}
			name := rapid.SampledFrom(backupsBefore).Draw(rt, "backup")
			if err := s.Restore(ctx, acme, name); err != nil {
				rt.Fatal(err)
			}
			overwrote = true
		}
		after := read()
		if n := markdown.CountLines(after); n > maxLines {
			rt.Fatalf("op %d: MEMORY.md has %d lines, over max_lines %d", i, n, maxLines)
		}
		if newest != "" && !strings.Contains(after, strings.TrimSuffix(newest, "\n")) {
			rt.Fatalf("op %d: the newest entry is not whole in MEMORY.md:\n%s\n--- want ---\n%s", i, after, newest)
		}
		backups, err := s.Backups(ctx, acme)
		if err != nil {
			rt.Fatal(err)
		}
		if len(backups) > keep {
			rt.Fatalf("op %d: %d backups, over backups_keep %d", i, len(backups), keep)
		}
		if overwrote && before != "" {
			if len(backups) == 0 || (len(backups) == len(backupsBefore) && backups[len(backups)-1] == backupsBefore[len(backupsBefore)-1]) {
				rt.Fatalf("op %d: MEMORY.md was overwritten without a new backup (before %v, after %v)", i, backupsBefore, backups)
			}
		}
	}
}

// TestMalformedEntriesAreLogged checks SPEC A6: an append over a file with a
// malformed entry logs it with its line and reason instead of dropping it silently.
func TestMalformedEntriesAreLogged(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zapcore.WarnLevel)
	b := newMemBackend()
	s, err := docstore.New(docstore.Config{Now: docstoretest.NewClock().Now}, b, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, acme, docstore.MemoryFile, []byte("### [2026-13-45 99:99] general\n\nbroken\n\n---\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEntries(ctx, acme, []markdown.Entry{{Time: time.Now(), Category: markdown.CategoryGeneral, Content: "ok"}}); err != nil {
		t.Fatal(err)
	}
	got := logs.FilterMessage("malformed entry skipped").All()
	if len(got) != 1 || got[0].ContextMap()["line"] != int64(1) {
		t.Fatalf("warnings = %v; want one for line 1", got)
	}
}
