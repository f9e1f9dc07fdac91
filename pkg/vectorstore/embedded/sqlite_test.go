package embedded

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// pragma reads an integer or text PRAGMA on one of db's connections.
func pragma[T any](t *testing.T, db *sql.DB, name string) T {
	t.Helper()
	var v T
	if err := db.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// A new file gets the page size and the WAL settings the store is tuned for: the
// page size has to be set before the switch to WAL creates the file, which the
// driver's order of DSN parameters decides.
func TestEmbeddedNewFileSettings(t *testing.T) {
	s, err := New(Config{Path: filepath.Join(t.TempDir(), "v.db"), Dimensions: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if got := pragma[int](t, s.b.db, "page_size"); got != pageBytes {
		t.Errorf("page_size = %d, want %d", got, pageBytes)
	}
	if got := pragma[string](t, s.b.db, "journal_mode"); got != "wal" {
		t.Errorf("journal_mode = %q, want wal", got)
	}
	if got := pragma[int](t, s.b.db, "synchronous"); got != 1 {
		t.Errorf("synchronous = %d, want 1 (NORMAL)", got)
	}
	if got := pragma[int](t, s.b.db, "wal_autocheckpoint"); got != 0 {
		t.Errorf("wal_autocheckpoint = %d, want 0 (checkpoints run in the background)", got)
	}
	// The writes' connection has the large page cache, in KiB.
	var cache int
	if err := s.b.wconn.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&cache); err != nil {
		t.Fatal(err)
	}
	if cache != -DefaultWriteCacheMiB<<10 {
		t.Errorf("the write connection's cache_size = %d, want %d", cache, -DefaultWriteCacheMiB<<10)
	}
}

// A file made with another page size (every file before pageBytes changed) opens
// and keeps working with the page size it has.
func TestEmbeddedOpensFileWithOtherPageSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	old, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec("PRAGMA page_size=4096; PRAGMA journal_mode=WAL; CREATE TABLE created_before(x)"); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Path: path, Dimensions: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if got := pragma[int](t, s.b.db, "page_size"); got != 4096 {
		t.Errorf("page_size = %d, want the file's 4096", got)
	}
	ctx := context.Background()
	rec := vectorstore.Record{ID: vectorstore.DeterministicID("page-size", "1"), Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Episodic,
		Text: "kept", Vector: []float32{1, 0, 0, 0}, TS: time.Unix(1, 0)}
	if err := s.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "acme", "u1", rec.ID)
	if err != nil || len(got) != 1 || got[0].Text != "kept" {
		t.Fatalf("Get = %+v, %v; want the record written", got, err)
	}
}
