package docstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
)

// DefaultBaseDir is the memory directory when none is configured (SPEC A1).
const DefaultBaseDir = "~/.agentmem/memory"

const (
	dirMode  fs.FileMode = 0o755
	fileMode fs.FileMode = 0o644
	// flockRetry is how often a writer polls a lock file held by another process;
	// writers of this process queue on the in-process lock first and never poll.
	flockRetry = 2 * time.Millisecond
	// racyWindow is how recently changed a file may be and still get a Version
	// from ReadIfChanged. A file's times have the granularity of its file system,
	// a clock tick (at most 10 ms on Linux) or, where times are whole seconds (FAT,
	// ext3, HFS+), one or two seconds: a write within one granule of the one a
	// version was taken of could leave size and times as they were, while every
	// later one changes them.
	racyWindow       = 100 * time.Millisecond
	coarseRacyWindow = 2 * time.Second // for a file whose times are whole seconds
)

// FilesystemConfig configures the filesystem backend.
type FilesystemConfig struct {
	// BaseDir holds one directory per tenant with one per user below it. A leading
	// "~" is the home directory. Default DefaultBaseDir.
	BaseDir string
}

func (c *FilesystemConfig) setDefaults() {
	if c.BaseDir == "" {
		c.BaseDir = DefaultBaseDir
	}
}

// Validate reports configuration errors.
func (c FilesystemConfig) Validate() error {
	if c.BaseDir == "" {
		return errors.New("docstore: filesystem: BaseDir is required")
	}
	return nil
}

// Filesystem stores each namespace as a directory tree (docs/architecture.md "Storage").
// Writes go to a temp file in the target's directory, are fsynced and renamed over
// the target, so readers never see a partial file. Writers of one file are
// serialised by an in-process lock and then a flock(2) on ".<base>.lock" beside it.
type Filesystem struct {
	base   string
	locks  *pathLocks
	racy   time.Duration // racyWindow; tests shorten it
	logger *zap.Logger
}

var _ Backend = (*Filesystem)(nil)

// NewFilesystem returns a filesystem backend rooted at cfg.BaseDir. Directories are
// created on first write, not here, so a read-only inspection creates nothing.
func NewFilesystem(cfg FilesystemConfig, logger *zap.Logger) (*Filesystem, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, err := expandHome(cfg.BaseDir)
	if err != nil {
		return nil, err
	}
	if base, err = filepath.Abs(base); err != nil {
		return nil, fmt.Errorf("docstore: filesystem: base dir %q: %w", cfg.BaseDir, err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Filesystem{base: base, locks: newPathLocks(), racy: racyWindow, logger: logger.Named("docstore.fs")}, nil
}

// BaseDir is the absolute base directory.
func (f *Filesystem) BaseDir() string { return f.base }

func expandHome(dir string) (string, error) {
	if dir != "~" && !strings.HasPrefix(dir, "~/") {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("docstore: filesystem: expand %q: %w", dir, err)
	}
	return filepath.Join(home, dir[1:]), nil
}

// path maps (ns, rel) to an absolute path, after validating both and checking, as
// defence in depth, that the result stays inside the base directory.
func (f *Filesystem) path(ns Namespace, rel string, validate func(string) error) (string, error) {
	if err := ns.Validate(); err != nil {
		return "", err
	}
	if err := validate(rel); err != nil {
		return "", err
	}
	p := filepath.Join(f.base, ns.Tenant, ns.User, filepath.FromSlash(rel))
	r, err := filepath.Rel(f.base, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", fmt.Errorf("%w: %q resolves outside the memory directory", ErrInvalidPath, rel)
	}
	return p, nil
}

// Read implements Backend: ReadIfChanged against the zero Version, which no
// file matches.
func (f *Filesystem) Read(ctx context.Context, ns Namespace, name string) ([]byte, error) {
	data, _, _, err := f.ReadIfChanged(ctx, ns, name, Version{})
	return data, err
}

// ReadIfChanged implements Backend with one stat(2) as the check. Every write of
// this backend renames a new file over the old one, so new content comes with a new
// inode or change time; an edit in place by another program changes the
// modification time or size. Files changed within the last racyWindow get no
// Version and are read every time.
func (f *Filesystem) ReadIfChanged(ctx context.Context, ns Namespace, name string, since Version) ([]byte, Version, bool, error) {
	p, err := f.path(ns, name, ValidateName)
	if err != nil {
		return nil, Version{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, Version{}, false, err
	}
	if since != (Version{}) {
		// A failed stat is not an answer: the read below reports the error.
		if fi, err := os.Stat(p); err == nil && f.version(fi) == since {
			return nil, since, false, nil
		}
	}
	file, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Version{}, false, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, Version{}, false, fmt.Errorf("docstore: read %s: %w", name, err)
	}
	defer func() { _ = file.Close() }()
	// The version is taken before the read: content changed during the read
	// then carries an outdated version, which costs the next call a read, never
	// a missed change.
	fi, err := file.Stat()
	if err != nil {
		return nil, Version{}, false, fmt.Errorf("docstore: read %s: %w", name, err)
	}
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(file); err != nil {
		return nil, Version{}, false, fmt.Errorf("docstore: read %s: %w", name, err)
	}
	return buf.Bytes(), f.version(fi), true, nil
}

// version is a file's Version from its stat: inode, size, modification and
// change time; zero for a file changed within the racy window (or in the future).
func (f *Filesystem) version(fi fs.FileInfo) Version {
	ino, ctime := inodeAndCtime(fi)
	changed := fi.ModTime()
	if ctime.After(changed) {
		changed = ctime
	}
	racy := f.racy
	if changed.Nanosecond() == 0 {
		racy = max(racy, coarseRacyWindow)
	}
	if time.Since(changed) < racy {
		return Version{}
	}
	return Version{ino, uint64(fi.Size()), uint64(fi.ModTime().UnixNano()), uint64(ctime.UnixNano())}
}

// Update implements Backend.
func (f *Filesystem) Update(ctx context.Context, ns Namespace, name string, fn func(old []byte, exists bool) ([]byte, error)) error {
	p, err := f.path(ns, name, ValidateName)
	if err != nil {
		return err
	}
	return f.locked(ctx, p, func() error {
		old, err := os.ReadFile(p)
		exists := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("docstore: read %s: %w", name, err)
		}
		data, err := fn(old, exists)
		if err != nil {
			return err
		}
		return writeAtomic(p, data)
	})
}

// Put implements Backend. It takes the file's lock too, so a Put is never lost
// inside a concurrent Update's read-modify-write.
func (f *Filesystem) Put(ctx context.Context, ns Namespace, name string, data []byte) error {
	p, err := f.path(ns, name, ValidateName)
	if err != nil {
		return err
	}
	return f.locked(ctx, p, func() error { return writeAtomic(p, data) })
}

// Delete implements Backend.
func (f *Filesystem) Delete(ctx context.Context, ns Namespace, name string) error {
	p, err := f.path(ns, name, ValidateName)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Dir(p)); errors.Is(err, fs.ErrNotExist) {
		return nil // nothing to delete, and no reason to create directories for a lock
	}
	return f.locked(ctx, p, func() error {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("docstore: delete %s: %w", name, err)
		}
		return syncDir(filepath.Dir(p))
	})
}

// List implements Backend. Only names of the layout are returned: lock and temp
// files, and anything else placed in the directory by hand, are not part of it.
func (f *Filesystem) List(ctx context.Context, ns Namespace, dir string) ([]string, error) {
	root, err := f.path(ns, dir, validateDir)
	if err != nil {
		return nil, err
	}
	nsDir := filepath.Join(f.base, ns.Tenant, ns.User)
	var names []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(nsDir, p)
		if err != nil {
			return err
		}
		if name := filepath.ToSlash(rel); ValidateName(name) == nil {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("docstore: list %q: %w", dir, err)
	}
	sort.Strings(names)
	return names, nil
}

// locked runs fn holding the in-process lock and then the file lock of path p.
// Lock order is always in-process first, and no caller holds two paths at once.
func (f *Filesystem) locked(ctx context.Context, p string, fn func() error) error {
	unlock, err := f.locks.lock(ctx, p)
	if err != nil {
		return err
	}
	defer unlock()
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("docstore: create directory: %w", err)
	}
	fl := flock.New(filepath.Join(dir, "."+filepath.Base(p)+".lock"), flock.SetPermissions(fileMode))
	ok, err := fl.TryLockContext(ctx, flockRetry)
	if err != nil {
		return fmt.Errorf("docstore: lock %s: %w", filepath.Base(p), err)
	}
	if !ok {
		return fmt.Errorf("docstore: lock %s: %w", filepath.Base(p), ctx.Err())
	}
	// The lock file stays on disk: removing it would let a process that already
	// opened it hold a lock on an unlinked inode while a newcomer locks a new one.
	defer func() {
		if err := fl.Unlock(); err != nil {
			f.logger.Warn("unlock failed", zap.String("path", fl.Path()), zap.Error(err))
		}
	}()
	return fn()
}

// writeAtomic replaces p with data: temp file in the same directory, fsync, rename,
// fsync of the directory so the rename itself survives a crash. The caller holds
// p's locks, which also created the directory.
func writeAtomic(p string, data []byte) (err error) {
	dir := filepath.Dir(p)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return fmt.Errorf("docstore: create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("docstore: write %s: %w", filepath.Base(p), err)
	}
	if err = tmp.Chmod(fileMode); err != nil {
		return fmt.Errorf("docstore: chmod %s: %w", filepath.Base(p), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("docstore: fsync %s: %w", filepath.Base(p), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("docstore: close %s: %w", filepath.Base(p), err)
	}
	if err = os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("docstore: rename onto %s: %w", filepath.Base(p), err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("docstore: open directory for fsync: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("docstore: fsync directory: %w", err)
	}
	return nil
}

// Users implements Backend: the tenant directory's subdirectories named by valid ids.
func (f *Filesystem) Users(ctx context.Context, tenant string) ([]string, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidNamespace, err)
	}
	users, err := subdirIDs(filepath.Join(f.base, tenant), "user")
	if err != nil {
		return nil, fmt.Errorf("docstore: users of %s: %w", tenant, err)
	}
	return users, nil
}

// Tenants implements Backend: the base directory's subdirectories named by
// valid ids.
func (f *Filesystem) Tenants(ctx context.Context) ([]string, error) {
	tenants, err := subdirIDs(f.base, "tenant")
	if err != nil {
		return nil, fmt.Errorf("docstore: tenants: %w", err)
	}
	return tenants, nil
}

// subdirIDs returns the sorted names of dir's subdirectories that are valid
// ids of kind; a missing dir has none.
func subdirIDs(dir, kind string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && events.ValidateID(kind, e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// DeleteNamespace implements Backend: the namespace directory goes, lock files
// and all.
func (f *Filesystem) DeleteNamespace(ctx context.Context, ns Namespace) (int, error) {
	names, err := f.List(ctx, ns, "")
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(f.base, ns.Tenant, ns.User)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("docstore: delete %s/%s: %w", ns.Tenant, ns.User, err)
	}
	return len(names), syncDir(filepath.Dir(dir))
}
