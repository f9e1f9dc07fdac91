package backup_test

// Request-shape tests of the Qdrant path: backup.Qdrant against an
// httptest server that records each request and answers as Qdrant's REST API
// does. They pin what is sent; Qdrant's handling of it is left to a real
// server (AGENTMEM_TEST_QDRANT_ADDR), which these machines cannot run.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/backup"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// qdrantReq is one request the fake Qdrant received.
type qdrantReq struct {
	Method, URI, APIKey string
	// Upload is the "snapshot" part of a multipart upload.
	Upload []byte
}

// fakeQdrant answers the snapshot endpoints for one collection holding
// snapshot; exists says whether the collection exists, checksum overrides
// the checksum it reports, failGet makes the download fail.
type fakeQdrant struct {
	collection string
	snapshot   []byte
	exists     bool
	checksum   string
	failGet    bool

	mu   sync.Mutex
	reqs []qdrantReq
}

const snapName = "agentmem_memories-2026-11-28-14-00-00.snapshot"

func (f *fakeQdrant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := qdrantReq{Method: r.Method, URI: r.URL.RequestURI(), APIKey: r.Header.Get("api-key")}
	base := "/collections/" + f.collection
	ok := func(result any) {
		_ = json.NewEncoder(w).Encode(map[string]any{"result": result, "status": "ok", "time": 0.01})
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == base+"/snapshots":
		sum := sha256.Sum256(f.snapshot)
		ok(map[string]any{"name": snapName, "creation_time": "2026-11-28T14:00:00", "size": len(f.snapshot), "checksum": cmp.Or(f.checksum, hex.EncodeToString(sum[:]))})
	case r.Method == http.MethodGet && r.URL.Path == base+"/snapshots/"+snapName:
		if f.failGet {
			http.Error(w, `{"status":{"error":"disk on fire"}}`, http.StatusInternalServerError)
			break
		}
		_, _ = w.Write(f.snapshot)
	case r.Method == http.MethodDelete && r.URL.Path == base+"/snapshots/"+snapName:
		ok(true)
	case r.Method == http.MethodGet && r.URL.Path == base+"/exists":
		ok(map[string]bool{"exists": f.exists})
	case r.Method == http.MethodPost && r.URL.Path == base+"/snapshots/upload":
		file, _, err := r.FormFile("snapshot")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			break
		}
		rec.Upload, _ = io.ReadAll(file)
		ok(true)
	default:
		http.Error(w, `{"status":{"error":"Not found"}}`, http.StatusNotFound)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, rec)
}

// requests returns the requests so far as "METHOD URI".
func (f *fakeQdrant) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reqs {
		out = append(out, r.Method+" "+r.URI)
	}
	return out
}

func serveQdrant(t *testing.T, f *fakeQdrant) backup.Qdrant {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return backup.Qdrant{URL: srv.URL + "/", Collection: f.collection, APIKey: "k3y"}
}

// TestQdrantSnapshotRequests: a backup creates a snapshot of the collection
// (waiting for it), downloads exactly that snapshot, checks it and deletes
// it in Qdrant, every request with the API key; a download that fails or
// does not match Qdrant's checksum fails the copy and still deletes the
// snapshot.
func TestQdrantSnapshotRequests(t *testing.T) {
	ctx := context.Background()
	want := []string{
		"POST /collections/agentmem_memories/snapshots?wait=true",
		"GET /collections/agentmem_memories/snapshots/" + snapName,
		"DELETE /collections/agentmem_memories/snapshots/" + snapName + "?wait=true",
	}
	f := &fakeQdrant{collection: "agentmem_memories", snapshot: []byte("qdrant snapshot bytes\x00\x01")}
	q := serveQdrant(t, f)
	path := filepath.Join(t.TempDir(), backup.QdrantFile)
	if err := q.Snapshot(ctx, path); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("requests\n%q\nwant\n%q", got, want)
	}
	for _, r := range f.reqs {
		if r.APIKey != "k3y" {
			t.Errorf("%s %s sent api-key %q, want the configured key", r.Method, r.URI, r.APIKey)
		}
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != string(f.snapshot) {
		t.Errorf("downloaded snapshot %q (%v), want Qdrant's bytes", data, err)
	}

	for _, c := range []struct {
		name  string
		fake  *fakeQdrant
		check func(error) bool
	}{
		{"checksum", &fakeQdrant{checksum: strings.Repeat("0", 64)}, func(err error) bool { return errors.Is(err, backup.ErrCorrupt) }},
		{"download", &fakeQdrant{failGet: true}, func(err error) bool {
			return strings.Contains(fmt.Sprint(err), "500") && strings.Contains(fmt.Sprint(err), "disk on fire")
		}},
	} {
		f := c.fake
		f.collection, f.snapshot = "agentmem_memories", []byte("bytes")
		q := serveQdrant(t, f)
		if err := q.Snapshot(ctx, filepath.Join(t.TempDir(), backup.QdrantFile)); !c.check(err) {
			t.Errorf("%s: Snapshot = %v", c.name, err)
		}
		if got := f.requests(); !slices.Equal(got, want) {
			t.Errorf("%s: requests\n%q\nwant the snapshot deleted all the same:\n%q", c.name, got, want)
		}
	}
}

// TestQdrantRecoverRequests: a restore asks whether the collection exists
// and refuses one that does; it uploads the snapshot file as the multipart
// part "snapshot", with snapshot priority, waiting, with the API key.
func TestQdrantRecoverRequests(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), backup.QdrantFile)
	if err := os.WriteFile(path, []byte("restored snapshot\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	exists := &fakeQdrant{collection: "agentmem_memories", exists: true}
	if err := serveQdrant(t, exists).Absent(ctx); !errors.Is(err, backup.ErrNotEmpty) {
		t.Errorf("Absent of an existing collection = %v, want ErrNotEmpty", err)
	}
	f := &fakeQdrant{collection: "agentmem_memories"}
	q := serveQdrant(t, f)
	if err := q.Absent(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Recover(ctx, path); err != nil {
		t.Fatal(err)
	}
	want := []string{"GET /collections/agentmem_memories/exists", "POST /collections/agentmem_memories/snapshots/upload?wait=true&priority=snapshot"}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("requests\n%q\nwant\n%q", got, want)
	}
	if up := f.reqs[len(f.reqs)-1]; string(up.Upload) != "restored snapshot\x00" || up.APIKey != "k3y" {
		t.Errorf("upload: part %q, api-key %q; want the file's bytes and the key", up.Upload, up.APIKey)
	}
	if err := (backup.Qdrant{URL: "qdrant:6333", Collection: "c"}).Recover(ctx, path); !errors.Is(err, backup.ErrInvalidConfig) {
		t.Errorf("Recover with a URL without scheme = %v, want ErrInvalidConfig", err)
	}
}

// TestBackupRestoreOfAQdrantCollection: with Qdrant as the vector store the
// backup holds its collection's snapshot (the manifest says qdrant, the file
// is what Qdrant served), and a restore uploads that snapshot into the
// target's Qdrant; a target whose collection exists, or without Qdrant, is
// refused before anything is written.
func TestBackupRestoreOfAQdrantCollection(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := &fakeQdrant{collection: "agentmem_memories", snapshot: []byte("the collection's snapshot")}
	serve(ctx, t, backup.ServerConfig{}, backup.ServerDeps{Conn: nc, JS: js, Vectors: serveQdrant(t, src), VectorBackend: backup.VectorQdrant,
		HoldWrites: func() func() { return func() {} }})
	// Until Run serves; that first hold is released at once.
	data, err := json.Marshal(backup.EndRequest{ID: begin(ctx, t, nc).ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.RequestWithContext(ctx, backup.SubjectEnd, data); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bk")
	m, err := backup.Backup(ctx, nc, dir, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Vector.Backend != backup.VectorQdrant {
		t.Errorf("manifest vector backend %q, want qdrant", m.Vector.Backend)
	}
	if data, err := os.ReadFile(filepath.Join(dir, backup.QdrantFile)); err != nil || string(data) != string(src.snapshot) {
		t.Fatalf("backup's %s: %q (%v), want Qdrant's snapshot", backup.QdrantFile, data, err)
	}

	target := func(q *backup.Qdrant) backup.Target {
		d := t.TempDir()
		return backup.Target{NATSStoreDir: filepath.Join(d, "nats"), VectorPath: filepath.Join(d, "vectors.db"), MarkdownDir: filepath.Join(d, "memory"), Qdrant: q}
	}
	refused := func(what string, tg backup.Target, sentinel error) {
		t.Helper()
		if _, err := backup.Restore(ctx, dir, tg); !errors.Is(err, sentinel) {
			t.Errorf("%s: %v, want %v", what, err, sentinel)
		}
		if _, err := os.Stat(tg.NATSStoreDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s wrote the NATS store (%v)", what, err)
		}
	}
	refused("restore without Qdrant", target(nil), backup.ErrUnsupported)
	existing := serveQdrant(t, &fakeQdrant{collection: "agentmem_memories", exists: true})
	refused("restore into an existing collection", target(&existing), backup.ErrNotEmpty)
	dst := &fakeQdrant{collection: "agentmem_memories"}
	q := serveQdrant(t, dst)
	if _, err := backup.Restore(ctx, dir, target(&q)); err != nil {
		t.Fatal(err)
	}
	if len(dst.reqs) != 2 || string(dst.reqs[1].Upload) != string(src.snapshot) {
		t.Errorf("restore's requests %q, want the backup's snapshot uploaded", dst.requests())
	}
}
