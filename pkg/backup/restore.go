package backup

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// Target is where a restore writes: the paths a configuration resolves for the
// data directory the restored stack will run on.
type Target struct {
	// NATSStoreDir is nats.embedded.store_dir: the streams are restored into an
	// embedded server on it.
	NATSStoreDir string
	// VectorPath is vector.path.
	VectorPath string
	// MarkdownDir is memory.dir.
	MarkdownDir string
	// Keys is the key directory (pkg/natsauth) of the deployment the backup is
	// of, required when it ran with NATS authentication (`up --auth`): its
	// streams were in that operator's account, and only its keys make them
	// readable with the same credentials. Empty: no authentication.
	Keys string
	// KeyDir is where Keys is copied: natsauth.KeyDir of the data directory,
	// which `up --auth` reads.
	KeyDir string
	// Qdrant is the collection a backup of a Qdrant collection is restored
	// into (it must not exist); nil when the target's vector store is the
	// embedded one, at VectorPath.
	Qdrant *Qdrant
}

// ReadManifest reads dir's manifest and checks every file it lists (size and
// SHA-256) before anything is written.
func ReadManifest(dir string) (Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return Manifest{}, fmt.Errorf("%w: %s has no %s (not a backup, or an interrupted one)", ErrCorrupt, dir, ManifestFile)
	}
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, ManifestFile, err)
	}
	if m.Format != Format || m.Version != Version {
		return Manifest{}, fmt.Errorf("%w: %s is format %q version %d, this build reads %q version %d", ErrCorrupt, ManifestFile, m.Format, m.Version, Format, Version)
	}
	files := m.Files
	for _, s := range m.Streams {
		files = append(files, s.FileEntry)
	}
	for _, fe := range files {
		if err := checkFile(dir, fe); err != nil {
			return Manifest{}, err
		}
	}
	return m, nil
}

// checkFile compares dir's file fe.Path with its entry.
func checkFile(dir string, fe FileEntry) error {
	if !filepath.IsLocal(filepath.FromSlash(fe.Path)) {
		return fmt.Errorf("%w: %s names a file outside the backup: %q", ErrCorrupt, ManifestFile, fe.Path)
	}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(fe.Path)))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, fe.Path, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, fe.Path, err)
	}
	if n != fe.Bytes {
		return fmt.Errorf("%w: %s has %d bytes, the manifest says %d (truncated?)", ErrCorrupt, fe.Path, n, fe.Bytes)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != fe.SHA256 {
		return fmt.Errorf("%w: %s has SHA-256 %s, the manifest says %s (changed since the backup)", ErrCorrupt, fe.Path, sum, fe.SHA256)
	}
	return nil
}

// Restore writes the backup in dir into t, whose places must be empty: the
// streams into an embedded server on t.NATSStoreDir (consumer positions
// included), the vector store's copy to t.VectorPath and the Markdown tree
// under t.MarkdownDir. A stack started on them has the memory of the cut and
// processes the events after it.
func Restore(ctx context.Context, dir string, t Target) (Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Manifest{}, err
	}
	if err := vectorTarget(ctx, m.Vector.Backend, t); err != nil {
		return Manifest{}, err
	}
	authenticated := nkeys.IsValidPublicAccountKey(m.Account)
	if authenticated && t.Keys == "" {
		return Manifest{}, fmt.Errorf("%w: the backup is of a deployment with NATS authentication (`up --auth`): its streams are account %s's; "+
			"give that deployment's key directory (its data directory's auth/, `restore --keys DIR`), so that they are restored into the same account and its credentials keep working",
			ErrAuth, m.Account)
	}
	places := []string{t.NATSStoreDir, t.VectorPath, t.MarkdownDir}
	if t.Keys != "" {
		places = append(places, t.KeyDir)
	}
	for _, p := range places {
		if err := absent(p); err != nil {
			return Manifest{}, err
		}
	}
	var auth *natsauth.Authority
	if t.Keys != "" {
		if auth, err = restoreKeys(t.Keys, t.KeyDir, m.Account, authenticated); err != nil {
			return Manifest{}, err
		}
	}
	if err := restoreStreams(ctx, dir, t.NATSStoreDir, m.Streams, auth); err != nil {
		return Manifest{}, err
	}
	for _, fe := range m.Files {
		src := filepath.Join(dir, filepath.FromSlash(fe.Path))
		switch fe.Path {
		case VectorsFile:
			err = copyFile(src, t.VectorPath)
		case QdrantFile:
			err = t.Qdrant.Recover(ctx, src)
		case MarkdownFile:
			err = untar(src, t.MarkdownDir)
		default:
			err = fmt.Errorf("%w: %s lists an unknown file %q", ErrCorrupt, ManifestFile, fe.Path)
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("backup: restore %s: %w", fe.Path, err)
		}
	}
	return m, nil
}

// vectorTarget checks that t can take a backup's vector store of backend:
// the embedded store's file into VectorPath (checked with the other places),
// a Qdrant snapshot into a Qdrant collection that does not exist.
func vectorTarget(ctx context.Context, backend string, t Target) error {
	switch {
	case backend == VectorEmbedded && t.Qdrant == nil:
		return nil
	case backend == VectorQdrant && t.Qdrant != nil:
		return t.Qdrant.Absent(ctx)
	case backend == VectorEmbedded:
		return fmt.Errorf("%w: the backup's vector store is the embedded one; restore it with vector.backend embedded (then move it with agentmem export/import)", ErrUnsupported)
	case backend == VectorQdrant:
		return fmt.Errorf("%w: the backup's vector store is a Qdrant collection; restore it with vector.backend qdrant and vector.qdrant.http_url, Qdrant's REST API", ErrUnsupported)
	}
	return fmt.Errorf("%w: vector backend %q", ErrUnsupported, backend)
}

// restoreKeys copies the key directory from into to and loads it; with
// authenticated, its account must be account (the backup's). On any error the
// copy is removed again (to was checked absent or empty).
func restoreKeys(from, to, account string, authenticated bool) (*natsauth.Authority, error) {
	auth, err := copyKeys(from, to)
	if err == nil && authenticated && auth.AccountPublicKey() != account {
		err = fmt.Errorf("%w: the keys in %s sign account %s, the backup's streams are account %s's: give the key directory of the deployment the backup is of",
			ErrAuth, from, auth.AccountPublicKey(), account)
	}
	if err != nil {
		_ = os.RemoveAll(to)
		return nil, err
	}
	return auth, nil
}

// copyKeys copies the regular files of from into to and loads them.
func copyKeys(from, to string) (*natsauth.Authority, error) {
	entries, err := os.ReadDir(from)
	if err != nil {
		return nil, fmt.Errorf("%w: key directory: %w", ErrAuth, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return nil, fmt.Errorf("%w: copy the key directory: %w", ErrAuth, err)
		}
	}
	return natsauth.New(natsauth.Config{Dir: to}, nil)
}

// restoreStreams restores every snapshot into an embedded server on storeDir,
// without a listener, through the JetStream API as against any server; with
// auth, into its account, as its service user.
func restoreStreams(ctx context.Context, dir, storeDir string, streams []StreamEntry, auth *natsauth.Authority) error {
	embedded, conn := bus.EmbeddedConfig{StoreDir: storeDir}, bus.ConnConfig{Name: "agentmem-restore"}
	if auth != nil {
		trust, err := auth.Trust()
		if err != nil {
			return err
		}
		if conn.CredsFile, err = auth.WriteServiceCreds(); err != nil {
			return err
		}
		embedded.Auth = &trust
	}
	srv, err := bus.StartEmbedded(embedded)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	conn.InProcess = srv
	nc, err := bus.Connect(conn, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	for _, s := range streams {
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(s.Path)))
		if err != nil {
			return err
		}
		err = RestoreStream(ctx, nc, StreamSnapshot{Config: s.Config, State: s.State}, f)
		_ = f.Close()
		if err != nil {
			return err
		}
	}
	return resumeConsumers(ctx, nc, streams)
}

// resumeConsumers resumes the consumers the snapshots hold paused (the cut
// paused them), so that the restored workers start at once.
func resumeConsumers(ctx context.Context, nc *nats.Conn, streams []StreamEntry) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for _, s := range streams {
		stream, err := js.Stream(ctx, s.Name)
		if err != nil {
			return fmt.Errorf("%w: restored stream %s: %w", ErrStream, s.Name, err)
		}
		infos := stream.ListConsumers(ctx)
		for ci := range infos.Info() {
			if !ci.Paused {
				continue
			}
			if _, err := js.ResumeConsumer(ctx, s.Name, ci.Name); err != nil {
				return fmt.Errorf("%w: resume consumer %s of %s: %w", ErrStream, ci.Name, s.Name, err)
			}
		}
		if err := infos.Err(); err != nil {
			return fmt.Errorf("%w: consumers of %s: %w", ErrStream, s.Name, err)
		}
	}
	return nil
}

// absent is nil when p does not exist or is an empty directory.
func absent(p string) error {
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s exists", ErrNotEmpty, p)
	}
	return emptyDir(p)
}

// copyFile copies src to the new file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	return create(dst, 0o600, in)
}

// create writes r to the new file path (its directory made as needed).
func create(path string, mode os.FileMode, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// untar writes the regular files of the tar file src under dir.
func untar(src, dir string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.FromSlash(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !filepath.IsLocal(name) || strings.HasPrefix(hdr.Name, "/") {
			return fmt.Errorf("%w: %s holds %q, not a file of the tree", ErrCorrupt, MarkdownFile, hdr.Name)
		}
		if err := create(filepath.Join(dir, name), os.FileMode(hdr.Mode).Perm()|0o600, tr); err != nil {
			return err
		}
	}
}
