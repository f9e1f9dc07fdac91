package docstore_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
)

var errDiskFull = errors.New("no space left on device")

// diskFull is the filesystem backend with writes of one file failing, as a
// full disk or a lost volume makes them fail (the tests run as root, so file
// permissions cannot).
type diskFull struct {
	docstore.Backend
	name string
}

func (d *diskFull) Put(ctx context.Context, ns docstore.Namespace, name string, data []byte) error {
	if name == d.name {
		return errDiskFull
	}
	return d.Backend.Put(ctx, ns, name, data)
}

func (d *diskFull) Update(ctx context.Context, ns docstore.Namespace, name string, fn func([]byte, bool) ([]byte, error)) error {
	if name == d.name {
		return errDiskFull
	}
	return d.Backend.Update(ctx, ns, name, fn)
}

// fsStore is a Store on the filesystem backend; over is the backend it uses,
// the filesystem's wrapped by wrap.
type fsStore struct {
	*docstore.Store
	over docstore.Backend
}

func filesystemStore(t *testing.T, clk *docstoretest.Clock, wrap func(docstore.Backend) docstore.Backend) fsStore {
	t.Helper()
	b, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: t.TempDir()}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	over := wrap(b)
	s, err := docstore.New(docstore.Config{Now: clk.Now}, over, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return fsStore{s, over}
}

func asIs(b docstore.Backend) docstore.Backend { return b }

// files reads every file of ns: the backups in one map, the others in the
// other.
func files(t *testing.T, s fsStore, ns docstore.Namespace) (backups, others map[string]string) {
	t.Helper()
	ctx := context.Background()
	names, err := s.over.List(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	backups, others = map[string]string{}, map[string]string{}
	for _, name := range names {
		data, err := s.over.Read(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(name, docstore.BackupsDir+"/") {
			backups[name] = string(data)
		} else {
			others[name] = string(data)
		}
	}
	return backups, others
}

func put(t *testing.T, s fsStore, ns docstore.Namespace, name, data string) {
	t.Helper()
	if err := s.PutFile(context.Background(), ns, name, 0, []byte(data)); err != nil {
		t.Fatalf("PutFile %s: %v", name, err)
	}
}

// SPEC A8 for an import: a Markdown file it overwrites with other content is
// backed up first; the same content again, a new file or a file that is not
// Markdown takes no backup.
func TestImportBacksUpWhatItOverwrites(t *testing.T) {
	clk := docstoretest.NewClock()
	s := filesystemStore(t, clk, asIs)
	ns := docstore.Namespace{Tenant: "acme", User: "u1"}
	put(t, s, ns, docstore.MemoryFile, "before\n")
	put(t, s, ns, docstore.PolicyOverridesFile, `{"retrieve_limit": 5}`)
	clk.Advance(1e9)
	put(t, s, ns, docstore.MemoryFile, "imported\n")
	put(t, s, ns, docstore.MemoryFile, "imported\n")
	put(t, s, ns, "202611/20261122.md", "a new note\n")
	put(t, s, ns, docstore.PolicyOverridesFile, `{"retrieve_limit": 7}`)
	backups, others := files(t, s, ns)
	if len(backups) != 1 || others[docstore.MemoryFile] != "imported\n" || others["202611/20261122.md"] != "a new note\n" {
		t.Fatalf("backups %v, files %v; want one backup, of MEMORY.md", backups, others)
	}
	for name, data := range backups {
		if target, _ := s.BackupTarget(name); target != docstore.MemoryFile || data != "before\n" {
			t.Fatalf("backup %s holds %q; want MEMORY.md as it was before the import", name, data)
		}
	}
}

// SPEC A8 for a rebuild: the namespace is swapped for the one built aside in one
// step. A write failing midway leaves every file as it was (what was written is
// put back, the new files removed); the swap that succeeds leaves exactly the
// rebuilt files, the backup of each Markdown file it overwrote, and the old
// backups.
func TestReplaceNamespaceSwapsOrLeavesTheNamespaceAlone(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	ns := docstore.Namespace{Tenant: "acme", User: "u1"}
	full := &diskFull{name: docstore.UserPrefsFile}
	target := filesystemStore(t, clk, func(b docstore.Backend) docstore.Backend { full.Backend = b; return full })
	put(t, target, ns, docstore.MemoryFile, "old memory\n")
	if _, err := target.Replace(ctx, ns, docstore.MemoryFile, []byte("old memory, edited\n")); err != nil {
		t.Fatal(err)
	}
	put(t, target, ns, "202611/20261121.md", "old note\n")
	put(t, target, ns, docstore.PolicyOverridesFile, `{"retrieve_limit": 5}`)
	oldBackups, before := files(t, target, ns)

	rebuilt := filesystemStore(t, clk, asIs)
	put(t, rebuilt, ns, docstore.MemoryFile, "rebuilt memory\n")
	put(t, rebuilt, ns, docstore.UserPrefsFile, "rebuilt prefs\n")
	put(t, rebuilt, ns, "202611/20261122.md", "rebuilt note\n")
	_, want := files(t, rebuilt, ns)

	clk.Advance(1e9)
	_, err := target.ReplaceNamespace(ctx, rebuilt.Store, ns)
	if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "as it was") {
		t.Fatalf("ReplaceNamespace with %s failing: %v; want the failure, the namespace said to be as it was", full.name, err)
	}
	if _, after := files(t, target, ns); !maps.Equal(after, before) {
		t.Fatalf("after a failed swap the files are %v; want them as they were: %v", after, before)
	}

	full.name = ""
	clk.Advance(1e9)
	if n, err := target.ReplaceNamespace(ctx, rebuilt.Store, ns); err != nil || n != len(want) {
		t.Fatalf("ReplaceNamespace = %d, %v; want %d files", n, err, len(want))
	}
	backups, after := files(t, target, ns)
	if !maps.Equal(after, want) {
		t.Fatalf("after the swap the files are %v; want the rebuilt ones %v", after, want)
	}
	var ofOldMemory int
	for name, data := range backups {
		if data == "old memory, edited\n" {
			ofOldMemory++
		}
		if old, ok := oldBackups[name]; ok && old != data {
			t.Fatalf("old backup %s changed to %q", name, data)
		}
	}
	if ofOldMemory == 0 || len(backups) < len(oldBackups)+1 {
		t.Fatalf("backups %v; want the old ones %v and one of the MEMORY.md the swap overwrote", backups, oldBackups)
	}
}
