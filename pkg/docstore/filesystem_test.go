package docstore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
	"github.com/agentmem/agentmem/pkg/markdown"
)

var acme = docstore.Namespace{Tenant: "acme", User: "u1"}

func newFilesystem(t *testing.T, base string) *docstore.Filesystem {
	t.Helper()
	fsb, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: base}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewFilesystem: %v", err)
	}
	return fsb
}

func newFSStore(t *testing.T, base string, logger *zap.Logger) *docstore.Store {
	t.Helper()
	s, err := docstore.New(docstore.Config{Now: docstoretest.NewClock().Now}, newFilesystem(t, base), logger)
	if err != nil {
		t.Fatalf("docstore.New: %v", err)
	}
	return s
}

// walk returns every regular file under root as a slash path relative to it.
func walk(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// isLockFile reports ".<base>.lock", the lock file beside <base>.
func isLockFile(rel string) bool {
	base := rel[strings.LastIndexByte(rel, '/')+1:]
	return strings.HasPrefix(base, ".") && strings.HasSuffix(base, ".lock")
}

func TestFilesystemConformance(t *testing.T) {
	docstoretest.RunSuite(t, func(t *testing.T) docstore.Backend {
		b := newFilesystem(t, t.TempDir())
		b.SetRacyWindow(0) // files written a moment ago get versions, so the stat check is what is tested
		return b
	})
}

// A file written within the racy window has no version yet: it is read every time,
// and only once it is older is it judged by its stat.
func TestFilesystemReadIfChangedTrustsOnlySettledFiles(t *testing.T) {
	ctx := context.Background()
	b := newFilesystem(t, t.TempDir())
	b.SetRacyWindow(time.Hour) // "within the window" however slowly the test runs
	if err := b.Put(ctx, acme, docstore.MemoryFile, []byte("fresh\n")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		data, v, changed, err := b.ReadIfChanged(ctx, acme, docstore.MemoryFile, docstore.Version{})
		if err != nil || !changed || string(data) != "fresh\n" || v != (docstore.Version{}) {
			t.Fatalf("ReadIfChanged of a fresh file = %q, %v, changed %v, %v; want its content, the zero version", data, v, changed, err)
		}
	}

	b.SetRacyWindow(0)
	_, v, _, err := b.ReadIfChanged(ctx, acme, docstore.MemoryFile, docstore.Version{})
	if err != nil || v == (docstore.Version{}) {
		t.Fatalf("ReadIfChanged of a settled file: version %v, %v; want a version", v, err)
	}
	if data, again, changed, err := b.ReadIfChanged(ctx, acme, docstore.MemoryFile, v); err != nil || changed || data != nil || again != v {
		t.Fatalf("ReadIfChanged at the current version = %q, %v, changed %v, %v; want unchanged", data, again, changed, err)
	}
}

func TestFilesystemConfigDefaultsAndHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for base, want := range map[string]string{
		"":            filepath.Join(home, ".agentmem", "memory"),
		"~/mem":       filepath.Join(home, "mem"),
		"/srv/memory": "/srv/memory",
	} {
		fsb, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: base}, nil)
		if err != nil {
			t.Fatalf("BaseDir %q: %v", base, err)
		}
		if fsb.BaseDir() != want {
			t.Fatalf("BaseDir %q resolves to %q, want %q", base, fsb.BaseDir(), want)
		}
	}
	if entries, err := os.ReadDir(home); err != nil || len(entries) != 0 {
		t.Fatalf("constructing backends created %v, %v; directories belong to the first write", entries, err)
	}
}

// SPEC A1/A11: the namespace directory and its parents appear on the first write.
func TestFilesystemCreatesNamespaceDirectoriesWithParents(t *testing.T) {
	base := filepath.Join(t.TempDir(), "not", "yet", "memory")
	s := newFSStore(t, base, zaptest.NewLogger(t))
	id := rapid.StringMatching(`[A-Za-z0-9_-]{1,40}`)
	rapid.Check(t, func(rt *rapid.T) {
		n := docstore.Namespace{Tenant: id.Draw(rt, "tenant"), User: id.Draw(rt, "user")}
		e := markdown.Entry{Time: docstoretest.Start, Category: markdown.CategoryGeneral, Content: "fact"}
		if _, err := s.AppendEntries(context.Background(), n, []markdown.Entry{e}); err != nil {
			rt.Fatal(err)
		}
		note, err := s.AppendToday(context.Background(), n, "note")
		if err != nil {
			rt.Fatal(err)
		}
		dir := filepath.Join(base, n.Tenant, n.User)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			rt.Fatalf("namespace directory %s: %v", dir, err)
		}
		for _, name := range []string{docstore.MemoryFile, note} {
			st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
			if err != nil || st.Mode().Perm() != 0o644 {
				rt.Fatalf("%s: %v, mode %v; want a 0644 file", name, err, st.Mode())
			}
		}
	})
}

func TestFilesystemOnDiskLayoutAndFormat(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	s := newFSStore(t, base, zaptest.NewLogger(t))
	start := docstoretest.Start
	entries := []markdown.Entry{
		{Time: start, Category: markdown.CategoryGeneral, Content: "Works in Berlin."},
		{Time: start, Category: markdown.CategoryFilePattern, Content: "Sales files: columns date, product, qty."},
		{Time: start, Category: markdown.CategoryUserPref, Content: "Charts in blue."},
		{Time: start.Add(time.Minute), Category: markdown.CategoryErrorSolution, Content: "KeyError 'qty': strip header spaces."},
	}
	if _, err := s.AppendEntries(ctx, acme, entries); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLongTerm(ctx, acme, "Prefers metric units."); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendToday(ctx, acme, "Opened sales.csv."); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace(ctx, acme, docstore.UserPrefsFile, []byte("Charts in green.\n")); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{`{"retrieve_limit":5}`, `{"retrieve_limit":6}`} {
		if _, err := s.SetPolicyOverrides(ctx, acme, []byte(o)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetLastLongTermCompress(ctx, acme, start); err != nil {
		t.Fatal(err)
	}

	var files []string
	for _, f := range walk(t, base) {
		if !isLockFile(f) {
			files = append(files, f)
		}
	}
	want := []string{
		"acme/u1/.last_longterm_compress",
		"acme/u1/202611/20261123.md",
		"acme/u1/MEMORY.md",
		"acme/u1/backups/20261123_101500_user_prefs.md",
		"acme/u1/file_patterns.md",
		"acme/u1/policy_overrides.json",
		"acme/u1/policy_snapshots/20261123_101500.json",
		"acme/u1/policy_snapshots/20261123_101500_1.json",
		"acme/u1/user_prefs.md",
	}
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Fatalf("on-disk files:\n%s\nwant:\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	read := func(rel string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(base, "acme", "u1", filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for rel, content := range map[string]string{
		"MEMORY.md": "### [2026-11-23 10:15] general\n\nWorks in Berlin.\n\n---\n\n" +
			"### [2026-11-23 10:16] error_solution\n\nKeyError 'qty': strip header spaces.\n\n---\n\n" +
			"### [2026-11-23 10:15] general\n\nPrefers metric units.\n\n---\n",
		"file_patterns.md":                        "### [2026-11-23 10:15] file_pattern\n\nSales files: columns date, product, qty.\n\n---\n",
		"backups/20261123_101500_user_prefs.md":   "### [2026-11-23 10:15] user_pref\n\nCharts in blue.\n\n---\n",
		"user_prefs.md":                           "Charts in green.\n",
		"202611/20261123.md":                      "### 10:15\n\nOpened sales.csv.\n",
		"policy_overrides.json":                   `{"retrieve_limit":6}`,
		"policy_snapshots/20261123_101500_1.json": `{"retrieve_limit":5}`,
		".last_longterm_compress":                 "2026-11-23T10:15:00Z\n",
	} {
		if got := read(rel); got != content {
			t.Errorf("%s:\n%q\nwant:\n%q", rel, got, content)
		}
	}
	for _, dir := range []string{"acme", "acme/u1", "acme/u1/202611", "acme/u1/backups"} {
		if st, err := os.Stat(filepath.Join(base, dir)); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("directory %s: %v, mode %v; want 0755", dir, err, st.Mode())
		}
	}
}

// SPEC A8: a write failure is an error wrapping the cause, logged once, and no panic.
func TestFilesystemWriteFailureIsReturnedAndLoggedOnce(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	// Tests run as root, where permissions do not stop writes; a regular file where
	// the tenant directory belongs makes every mkdir below it fail with ENOTDIR.
	if err := os.WriteFile(filepath.Join(base, "acme"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.ErrorLevel)
	s := newFSStore(t, base, zap.New(core))
	e := []markdown.Entry{{Time: docstoretest.Start, Category: markdown.CategoryGeneral, Content: "fact"}}
	writes := map[string]func() error{
		"AppendEntries":  func() error { _, err := s.AppendEntries(ctx, acme, e); return err },
		"AppendLongTerm": func() error { return s.AppendLongTerm(ctx, acme, "fact") },
		"AppendToday":    func() error { _, err := s.AppendToday(ctx, acme, "note"); return err },
		"Replace":        func() error { _, err := s.Replace(ctx, acme, docstore.MemoryFile, []byte("x")); return err },
		"SetPolicyOverrides": func() error {
			_, err := s.SetPolicyOverrides(ctx, acme, []byte("{}"))
			return err
		},
		"SetLastLongTermCompress": func() error { return s.SetLastLongTermCompress(ctx, acme, time.Now()) },
	}
	for name, write := range writes {
		logs.TakeAll()
		err := write()
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("%s: got %v, want an error wrapping ENOTDIR", name, err)
		}
		if n := logs.Len(); n != 1 {
			t.Fatalf("%s: failure logged %d times, want once", name, n)
		}
	}
	if _, err := s.Head(ctx, acme, 10); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("Head: got %v, want an error wrapping ENOTDIR", err)
	}
}

// Writes that succeed warn about nothing: the warning is for a lock that
// would not come off (the operator's sign of a stuck file).
func TestFilesystemSuccessfulWritesWarnAboutNothing(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zapcore.WarnLevel)
	fsb, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: t.TempDir()}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	s, err := docstore.New(docstore.Config{Now: docstoretest.NewClock().Now}, fsb, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEntries(ctx, acme, []markdown.Entry{{Time: docstoretest.Start, Category: markdown.CategoryGeneral, Content: "fact"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace(ctx, acme, docstore.MemoryFile, []byte("# Memory\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPolicyOverrides(ctx, acme, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for _, e := range logs.All() {
		t.Errorf("warned: %s %v", e.Message, e.ContextMap())
	}
}

// A write that fails after its temp file was made (here the rename, onto a
// directory standing where the file belongs) removes the temp file: failures
// must not fill the namespace with half-written copies.
func TestFilesystemFailedWriteLeavesNoTempFile(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	fsb := newFilesystem(t, base)
	dir := filepath.Join(base, "acme", "u1")
	if err := os.MkdirAll(filepath.Join(dir, docstore.MemoryFile, "in the way"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsb.Put(ctx, acme, docstore.MemoryFile, []byte("x")); err == nil || !strings.Contains(err.Error(), "rename") {
		t.Fatalf("Put onto a directory: %v, want the rename's failure", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
}

func TestFilesystemLeavesNoTempOrLockFilesVisible(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	fsb := newFilesystem(t, base)
	s, err := docstore.New(docstore.Config{Now: docstoretest.NewClock().Now}, fsb, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				e := markdown.Entry{Time: docstoretest.Start, Category: markdown.CategoryGeneral, Content: fmt.Sprintf("w%d e%d", w, i)}
				if _, err := s.AppendEntries(ctx, acme, []markdown.Entry{e}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if _, err := s.Replace(ctx, acme, docstore.MemoryFile, []byte("short\n")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := fsb.Update(ctx, acme, docstore.UserPrefsFile, func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Update: %v", err)
	}
	files, err := s.Files(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0] != docstore.MemoryFile || !strings.HasPrefix(files[1], "backups/") {
		t.Fatalf("Files = %v; want MEMORY.md and one backup", files)
	}
	locks := 0
	for _, f := range walk(t, base) {
		switch {
		case strings.Contains(f, ".tmp-"):
			t.Fatalf("temp file left behind: %s", f)
		case isLockFile(f):
			locks++
		}
	}
	if locks == 0 {
		t.Fatal("no lock files found: the cross-process lock was not taken")
	}
}

const (
	childDirEnv = "AGENTMEM_DOCSTORE_CHILD_DIR"
	childIDEnv  = "AGENTMEM_DOCSTORE_CHILD_ID"
	perProcess  = 40
)

// newCrossProcessStore has no capacity bound, so every appended entry stays countable.
func newCrossProcessStore(t *testing.T, dir string, logger *zap.Logger) *docstore.Store {
	t.Helper()
	cfg := docstore.Config{MaxLines: 1 << 20, TargetLines: 1 << 20, Now: docstoretest.NewClock().Now}
	s, err := docstore.New(cfg, newFilesystem(t, filepath.Join(dir, "memory")), logger)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// appendAsWriter appends perProcess entries, one per call, as writer id.
func appendAsWriter(s *docstore.Store, id string) error {
	for i := range perProcess {
		e := markdown.Entry{Time: docstoretest.Start, Category: markdown.CategoryGeneral, Content: fmt.Sprintf("process %s entry %d", id, i)}
		if _, err := s.AppendEntries(context.Background(), acme, []markdown.Entry{e}); err != nil {
			return err
		}
	}
	return nil
}

// TestFilesystemCrossProcessChild is the child side of
// TestFilesystemCrossProcessAppends; run on its own it skips.
func TestFilesystemCrossProcessChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("helper process of TestFilesystemCrossProcessAppends")
	}
	// Start together with the other writers: the parent creates "go" once all run.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("start signal never came")
		}
		time.Sleep(time.Millisecond) // polling a file another process creates
	}
	if err := appendAsWriter(newCrossProcessStore(t, dir, zap.NewNop()), os.Getenv(childIDEnv)); err != nil {
		t.Fatal(err)
	}
}

func TestFilesystemCrossProcessAppends(t *testing.T) {
	const children = 2
	dir := t.TempDir()
	var cmds []*exec.Cmd
	outputs := make([]strings.Builder, children)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFilesystemCrossProcessChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childIDEnv+"="+strconv.Itoa(i))
		cmd.Stdout, cmd.Stderr = &outputs[i], &outputs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newCrossProcessStore(t, dir, zaptest.NewLogger(t))
	parentErr := appendAsWriter(s, "parent")
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outputs[i].String())
		}
		if !strings.Contains(outputs[i].String(), "--- PASS: TestFilesystemCrossProcessChild") {
			t.Fatalf("child %d did not run the writer:\n%s", i, outputs[i].String())
		}
	}
	if parentErr != nil {
		t.Fatal(parentErr)
	}
	data, err := s.ReadFile(context.Background(), acme, docstore.MemoryFile)
	if err != nil {
		t.Fatal(err)
	}
	got, perrs := markdown.ParseEntries(string(data))
	if len(perrs) > 0 || len(got) != (children+1)*perProcess {
		t.Fatalf("MEMORY.md has %d entries (%d malformed), want %d", len(got), len(perrs), (children+1)*perProcess)
	}
	seen := make(map[string]bool)
	for _, e := range got {
		if seen[e.Content] {
			t.Fatalf("entry %q appears twice", e.Content)
		}
		seen[e.Content] = true
	}
}

// Names and namespaces that try to escape write nothing anywhere on disk, not even
// beside the base directory.
func TestFilesystemEscapesWriteNothingOnDisk(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	fsb := newFilesystem(t, filepath.Join(parent, "memory"))
	write := func([]byte, bool) ([]byte, error) { return []byte("x"), nil }
	for _, name := range docstoretest.EscapingNames {
		if fsb.Put(ctx, acme, name, []byte("x")) == nil || fsb.Update(ctx, acme, name, write) == nil {
			t.Fatalf("write to %q accepted", name)
		}
	}
	for _, n := range docstoretest.EscapingNamespaces {
		if fsb.Put(ctx, n, docstore.MemoryFile, []byte("x")) == nil || fsb.Update(ctx, n, docstore.MemoryFile, write) == nil {
			t.Fatalf("write to namespace %+v accepted", n)
		}
	}
	if entries, err := os.ReadDir(parent); err != nil || len(entries) != 0 {
		t.Fatalf("rejected writes left %v, %v on disk", entries, err)
	}
}
