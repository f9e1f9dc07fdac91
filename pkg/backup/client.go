package backup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// beginTimeout bounds the begin request: the drain and the copies of the stores.
const beginTimeout = DefaultDrain + 5*time.Minute

// Options of Backup.
type Options struct {
	// Agentmem is the build writing the backup, recorded in the manifest.
	Agentmem string
	// Progress receives a line per step; nil for none.
	Progress io.Writer
}

// Backup copies the deployment nc is connected to into dir, which must not
// exist or be empty: the stores at a cut (see the package comment), every
// stream snapshotted while the cut holds, and the manifest last.
func Backup(ctx context.Context, nc *nats.Conn, dir string, opts Options) (Manifest, error) {
	if err := emptyDir(dir); err != nil {
		return Manifest{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, streamsDir), 0o700); err != nil {
		return Manifest{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return Manifest{}, err
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			_, _ = fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}
	account, err := accountOf(ctx, nc)
	if err != nil {
		return Manifest{}, err
	}
	begun, err := call(ctx, nc, SubjectBegin, nil, beginTimeout)
	if err != nil {
		return Manifest{}, err
	}
	progress("cut at %s sequence %d", begun.Cut.Stream, begun.Cut.Sequence)
	m := Manifest{Format: Format, Version: Version, Agentmem: opts.Agentmem, Created: time.Now().UTC(), Cut: begun.Cut, Markdown: begun.Markdown, Vector: VectorEntry{Backend: cmp.Or(begun.Vector, VectorEmbedded)}, Account: account}
	m.Streams, err = snapshotStreams(ctx, nc, js, dir, progress)
	// The hold ends whatever happened to the snapshots.
	if _, endErr := call(ctx, nc, SubjectEnd, EndRequest{ID: begun.ID}, time.Minute); err == nil {
		err = endErr
	}
	if err != nil {
		return Manifest{}, err
	}
	if m.Files, err = fetchObjects(ctx, js, dir, begun.Objects); err != nil {
		return Manifest{}, err
	}
	if err := writeManifest(dir, m); err != nil {
		return Manifest{}, err
	}
	progress("backup of %d streams and %d files in %s", len(m.Streams), len(m.Files), dir)
	return m, nil
}

// userInfoSubject is the server's answer to "who am I": every account imports
// it from the system account.
const userInfoSubject = "$SYS.REQ.USER.INFO"

// accountOf is the account of nc's user, as the server names it.
func accountOf(ctx context.Context, nc *nats.Conn) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, userInfoSubject, nil)
	if err != nil {
		return "", fmt.Errorf("backup: ask the server for the connection's account (%s): %w", userInfoSubject, err)
	}
	var reply struct {
		Data struct {
			Account string `json:"account"`
		} `json:"data"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return "", fmt.Errorf("backup: %s: bad reply: %w", userInfoSubject, err)
	}
	if reply.Error != nil || reply.Data.Account == "" {
		return "", fmt.Errorf("backup: %s: no account in the reply %q", userInfoSubject, msg.Data)
	}
	return reply.Data.Account, nil
}

// call sends a request to a backup endpoint and returns its reply.
func call(ctx context.Context, nc *nats.Conn, subject string, req any, timeout time.Duration) (BeginReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return BeginReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return BeginReply{}, fmt.Errorf("backup: no retriever answers %s: is the deployment running, and is this a service credential?", subject)
	}
	if err != nil {
		return BeginReply{}, fmt.Errorf("backup: %s: %w", subject, err)
	}
	var reply BeginReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return BeginReply{}, fmt.Errorf("backup: %s: bad reply: %w", subject, err)
	}
	if reply.Error != "" {
		return BeginReply{}, errors.New(reply.Error)
	}
	return reply, nil
}

// snapshotStreams snapshots every stream but the object store the copies travel in.
func snapshotStreams(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, dir string, progress func(string, ...any)) ([]StreamEntry, error) {
	var names []string
	list := js.StreamNames(ctx)
	for name := range list.Name() {
		if name != "OBJ_"+ObjectBucket {
			names = append(names, name)
		}
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("%w: list streams: %w", ErrStream, err)
	}
	slices.Sort(names)
	entries := make([]StreamEntry, 0, len(names))
	for _, name := range names {
		rel := filepath.Join(streamsDir, name+".snap")
		var snap StreamSnapshot
		fe, err := writeFile(dir, rel, func(w io.Writer) (err error) {
			snap, err = SnapshotStream(ctx, nc, name, w)
			return err
		})
		if err != nil {
			return nil, err
		}
		progress("stream %s: %d messages, %d bytes", name, snap.State.Msgs, fe.Bytes)
		entries = append(entries, StreamEntry{Name: name, Config: snap.Config, State: snap.State, FileEntry: fe})
	}
	return entries, nil
}

// fetchObjects copies the objects into dir and deletes the object store.
func fetchObjects(ctx context.Context, js jetstream.JetStream, dir string, objects []string) ([]FileEntry, error) {
	store, err := js.ObjectStore(ctx, ObjectBucket)
	if err != nil {
		return nil, fmt.Errorf("backup: object store %s: %w", ObjectBucket, err)
	}
	files := make([]FileEntry, 0, len(objects))
	for _, name := range objects {
		fe, err := writeFile(dir, name, func(w io.Writer) error {
			// The object store checks the object's digest as it reads.
			r, err := store.Get(ctx, name)
			if err != nil {
				return err
			}
			defer func() { _ = r.Close() }()
			_, err = io.Copy(w, r)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("backup: fetch %s: %w", name, err)
		}
		files = append(files, fe)
	}
	if err := js.DeleteObjectStore(ctx, ObjectBucket); err != nil {
		return nil, fmt.Errorf("backup: delete object store %s: %w", ObjectBucket, err)
	}
	return files, nil
}

// writeFile creates dir/rel, fills it with fill and returns its entry.
func writeFile(dir, rel string, fill func(io.Writer) error) (FileEntry, error) {
	f, err := os.OpenFile(filepath.Join(dir, rel), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return FileEntry{}, err
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	err = fill(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return FileEntry{Path: filepath.ToSlash(rel), Bytes: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeManifest writes m as dir's manifest, through a rename so that it is
// there whole or not at all.
func writeManifest(dir string, m Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+ManifestFile)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ManifestFile))
}

// emptyDir is nil when dir does not exist or is an empty directory.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s holds %s", ErrNotEmpty, dir, entries[0].Name())
	}
	return nil
}
