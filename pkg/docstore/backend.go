package docstore

import (
	"context"
	"errors"
)

// Sentinel errors; backends and Store wrap them with context.
var (
	ErrNotFound    = errors.New("docstore: not found")
	ErrInvalidPath = errors.New("docstore: invalid path")
	// ErrInvalidNamespace wraps events.ErrInvalidID for a bad tenant or user.
	ErrInvalidNamespace = errors.New("docstore: invalid namespace")
	// ErrConflict means a compare-and-set update kept losing to concurrent writers.
	ErrConflict = errors.New("docstore: too many concurrent update conflicts")
	// ErrTooLarge means a value exceeds what the backend can store in one file.
	ErrTooLarge = errors.New("docstore: value too large")
	// ErrInvalidContent means data for a structured file (policy overrides, the
	// compression stamp) is not in the required format.
	ErrInvalidContent = errors.New("docstore: invalid content")
	// ErrChanged means a compare-and-set (ReplaceIf) found the file changed since
	// the caller read it; nothing was written.
	ErrChanged = errors.New("docstore: changed since read")
)

// Namespace is one (tenant, user) memory; both IDs are validated with events.ValidateID.
type Namespace struct {
	Tenant string
	User   string
}

// Version identifies one stored content of a file, for readers that keep what they
// read (Backend.ReadIfChanged). What it holds is the backend's own (the filesystem:
// inode, size and times; JetStream: the KV revision); equal versions of a file mean
// equal content. The zero Version stands for "unknown" and matches no file.
type Version [4]uint64

// Backend is raw file storage for one memory layout. Names are slash-separated paths
// relative to the namespace directory ("MEMORY.md", "202611/20261123.md",
// "backups/20261123_101500_MEMORY.md"); Store validates them before any backend call.
//
// Update is the only read-modify-write primitive: it must be atomic against concurrent
// writers in this process and in other processes (file lock on the filesystem,
// compare-and-set with retry on JetStream), so appends are never lost.
type Backend interface {
	// Read returns the file's content, or an error wrapping ErrNotFound.
	Read(ctx context.Context, ns Namespace, name string) ([]byte, error)
	// ReadIfChanged is Read for a reader that keeps what it read: when the file
	// still holds the content of version since (returned by an earlier call), it
	// returns changed=false and no data, after a check cheaper than a read where
	// the backend has one. Otherwise it returns the content, its version (zero when
	// the backend cannot vouch for it, so that the next call reads again) and
	// changed=true.
	ReadIfChanged(ctx context.Context, ns Namespace, name string, since Version) (data []byte, v Version, changed bool, err error)
	// Update calls fn with the current content (exists=false when missing) and stores what
	// fn returns atomically. fn may be called more than once (CAS retry) and must be pure.
	// If fn returns an error, nothing is written and that error is returned.
	Update(ctx context.Context, ns Namespace, name string, fn func(old []byte, exists bool) ([]byte, error)) error
	// Put stores data, replacing any content, atomically.
	Put(ctx context.Context, ns Namespace, name string, data []byte) error
	// Delete removes the file; a missing file is not an error.
	Delete(ctx context.Context, ns Namespace, name string) error
	// List returns the names under dir ("" for the namespace root, "backups", "202611"),
	// recursively, sorted, as full relative names.
	List(ctx context.Context, ns Namespace, dir string) ([]string, error)
	// Users returns the users of tenant that have files, sorted.
	Users(ctx context.Context, tenant string) ([]string, error)
	// Tenants returns the tenants that have files, sorted; names that are not
	// valid tenant ids are left out.
	Tenants(ctx context.Context) ([]string, error)
	// DeleteNamespace removes every file of ns with whatever the backend keeps
	// of it besides (history, lock files, directories), and returns how many
	// files of the layout it removed.
	DeleteNamespace(ctx context.Context, ns Namespace) (int, error)
}
