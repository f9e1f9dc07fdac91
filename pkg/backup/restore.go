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

	"github.com/agentmem/agentmem/pkg/bus"
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
	if m.Vector.Backend != "embedded" {
		return Manifest{}, fmt.Errorf("%w: vector backend %q: this build restores the embedded store only", ErrUnsupported, m.Vector.Backend)
	}
	for _, p := range []string{t.NATSStoreDir, t.VectorPath, t.MarkdownDir} {
		if err := absent(p); err != nil {
			return Manifest{}, err
		}
	}
	if err := restoreStreams(ctx, dir, t.NATSStoreDir, m.Streams); err != nil {
		return Manifest{}, err
	}
	for _, fe := range m.Files {
		src := filepath.Join(dir, filepath.FromSlash(fe.Path))
		switch fe.Path {
		case VectorsFile:
			err = copyFile(src, t.VectorPath)
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

// restoreStreams restores every snapshot into an embedded server on storeDir,
// without a listener, through the JetStream API as against any server.
func restoreStreams(ctx context.Context, dir, storeDir string, streams []StreamEntry) error {
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: storeDir})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := bus.Connect(bus.ConnConfig{InProcess: srv, Name: "agentmem-restore"}, nil)
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
