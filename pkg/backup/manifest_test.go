package backup_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/backup"
)

// fakeBackup writes a backup directory of two files and its manifest.
func fakeBackup(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	m := backup.Manifest{Format: backup.Format, Version: backup.Version, Vector: backup.VectorEntry{Backend: "embedded"}}
	for _, f := range []struct{ path, data string }{{"streams/AGENTMEM.snap", "stream bytes"}, {backup.VectorsFile, "vector bytes"}} {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(f.data))
		fe := backup.FileEntry{Path: f.path, Bytes: int64(len(f.data)), SHA256: hex.EncodeToString(sum[:])}
		if strings.HasPrefix(f.path, "streams/") {
			m.Streams = append(m.Streams, backup.StreamEntry{Name: "AGENTMEM", FileEntry: fe})
		} else {
			m.Files = append(m.Files, fe)
		}
	}
	writeJSON(t, filepath.Join(dir, backup.ManifestFile), m)
	return dir
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReadManifestRefusesDamage: a backup whose files differ from its manifest in
// any way is refused with an error naming the file and what is wrong.
func TestReadManifestRefusesDamage(t *testing.T) {
	if _, err := backup.ReadManifest(fakeBackup(t)); err != nil {
		t.Fatalf("an intact backup: %v", err)
	}
	for _, tc := range []struct {
		name, want string
		damage     func(dir string)
	}{
		{"changed byte", "streams/AGENTMEM.snap has SHA-256", func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, "streams", "AGENTMEM.snap"), []byte("stream bytez"), 0o600)
		}},
		{"truncated", "vectors.db has 5 bytes, the manifest says 12", func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, backup.VectorsFile), []byte("vecto"), 0o600)
		}},
		{"missing file", "vectors.db", func(dir string) { _ = os.Remove(filepath.Join(dir, backup.VectorsFile)) }},
		{"no manifest", "has no manifest.json", func(dir string) { _ = os.Remove(filepath.Join(dir, backup.ManifestFile)) }},
		{"other version", "version 99", func(dir string) {
			writeJSON(t, filepath.Join(dir, backup.ManifestFile), backup.Manifest{Format: backup.Format, Version: 99})
		}},
		{"path outside", "outside the backup", func(dir string) {
			writeJSON(t, filepath.Join(dir, backup.ManifestFile), backup.Manifest{Format: backup.Format, Version: backup.Version,
				Files: []backup.FileEntry{{Path: "../../etc/passwd"}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeBackup(t)
			tc.damage(dir)
			_, err := backup.ReadManifest(dir)
			if !errors.Is(err, backup.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrCorrupt saying %q", err, tc.want)
			}
		})
	}
}

// TestRestoreRefusesTargetWithData: a restore never writes over a data
// directory in use, and says which path holds data.
func TestRestoreRefusesTargetWithData(t *testing.T) {
	dir := fakeBackup(t)
	target := t.TempDir()
	tg := backup.Target{NATSStoreDir: filepath.Join(target, "nats"), VectorPath: filepath.Join(target, "vectors.db"), MarkdownDir: filepath.Join(target, "memory")}
	if err := os.WriteFile(tg.VectorPath, []byte("live data"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := backup.Restore(context.Background(), dir, tg)
	if !errors.Is(err, backup.ErrNotEmpty) || !strings.Contains(err.Error(), tg.VectorPath) {
		t.Fatalf("err = %v, want ErrNotEmpty naming %s", err, tg.VectorPath)
	}
	if data, _ := os.ReadFile(tg.VectorPath); string(data) != "live data" {
		t.Fatalf("the target's file was changed: %q", data)
	}
	if _, err := os.Stat(tg.NATSStoreDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the restore started writing: %v", err)
	}
}
