package embedded_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// fileSize is the size of the file at path, 0 when it does not exist.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// upsertBatches writes batches of 20 records of checkpointDims dimensions (a
// record fills about a third of a page), each batch its own transaction, and
// returns how many records it wrote.
func upsertBatches(t *testing.T, s *embedded.Store, batches int) int {
	t.Helper()
	n := 0
	for range batches {
		recs := make([]vectorstore.Record, 20)
		for i := range recs {
			recs[i] = testRecord(n, checkpointDims)
			n++
		}
		if err := s.Upsert(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

const checkpointDims = 256

func testRecord(n, dims int) vectorstore.Record {
	vec := make([]float32, dims)
	vec[n%dims] = 1
	return vectorstore.Record{
		ID: vectorstore.DeterministicID("checkpoint", fmt.Sprint(n)), Tenant: "acme", UserID: fmt.Sprintf("u%d", n%5),
		MemoryType: vectorstore.Episodic, Text: fmt.Sprintf("memory %d, long enough to fill some of a page with text", n),
		Vector: vec, TS: time.Unix(int64(n), 0), Metadata: map[string]any{"n": n},
	}
}

// Commits leave their pages in the WAL; the background checkpoint copies them into
// the database file while the store stays open, and once the WAL is past
// WALRestartPages the next writes start it over instead of growing it: under a
// steady stream of writes the WAL file stays smaller than the data.
func TestEmbeddedCheckpointsInTheBackground(t *testing.T) {
	s, n := checkpointedUnderWrites(t, embedded.Config{CheckpointInterval: 5 * time.Millisecond, WALRestartPages: 32})
	got, err := s.Count(context.Background(), vectorstore.Filter{Tenant: "acme", UserID: "u1"})
	if err != nil || got != n/5 {
		t.Fatalf("count = %d, %v; want %d", got, err, n/5)
	}
}

// A burst of writes does not wait for the interval: once the WAL reaches
// WALRestartPages the checkpointer copies it and the writes start it over.
func TestEmbeddedCheckpointsWhenTheWALReachesItsBound(t *testing.T) {
	checkpointedUnderWrites(t, embedded.Config{CheckpointInterval: time.Hour, WALRestartPages: 32})
}

// checkpointedUnderWrites opens a store with cfg's checkpoint settings in a new
// file, writes 400 batches, and checks that the checkpointer copies them into the
// database file and that the writes started the WAL over. It returns the store and
// how many records it wrote.
func checkpointedUnderWrites(t *testing.T, cfg embedded.Config) (*embedded.Store, int) {
	t.Helper()
	cfg.Path, cfg.Dimensions = filepath.Join(t.TempDir(), "v.db"), checkpointDims
	s, err := embedded.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	empty := fileSize(t, cfg.Path)
	n := upsertBatches(t, s, 400)
	bustest.Eventually(t, 10*time.Second, func() error {
		if size := fileSize(t, cfg.Path); size < empty+int64(n)*4*checkpointDims {
			return fmt.Errorf("database file is %d bytes after %d records, %d when empty: not checkpointed", size, n, empty)
		}
		return nil
	})
	// Without a restart the WAL would hold a frame for every page written, more
	// than the database file.
	if wal, db := fileSize(t, cfg.Path+"-wal"), fileSize(t, cfg.Path); wal >= db {
		t.Fatalf("WAL file is %d bytes beside a %d-byte database: it was never started over", wal, db)
	}
	return s, n
}

func TestEmbeddedConfigRejectsNegativeCheckpointSettings(t *testing.T) {
	for _, cfg := range []embedded.Config{
		{Path: "x.db", Dimensions: 4, CheckpointInterval: -time.Second},
		{Path: "x.db", Dimensions: 4, WALRestartPages: -1},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
	}
}

// Checkpoint leaves every write in the database file and the WAL empty: the file
// alone then holds the data, as a copy of it taken then does.
func TestEmbeddedCheckpointEmptiesTheWAL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.db")
	// No background checkpoints within the test: the WAL keeps every commit.
	s, err := embedded.New(embedded.Config{Path: path, Dimensions: checkpointDims, CheckpointInterval: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	n := upsertBatches(t, s, 50)
	if wal := fileSize(t, path+"-wal"); wal < int64(n)*4*checkpointDims {
		t.Fatalf("WAL is %d bytes after %d records: the writes did not stay in it", wal, n)
	}
	if err := s.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wal := fileSize(t, path+"-wal"); wal != 0 {
		t.Fatalf("WAL is %d bytes after Checkpoint, want 0", wal)
	}
	// A copy of the file alone holds every record.
	cp := filepath.Join(dir, "copy.db")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := embedded.New(embedded.Config{Path: cp, Dimensions: checkpointDims}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if got, err := c.Count(context.Background(), vectorstore.Filter{Tenant: "acme", UserID: "u1"}); err != nil || got != n/5 {
		t.Fatalf("copy's count = %d, %v; want %d", got, err, n/5)
	}
	// Writes go on after it.
	if err := s.Upsert(context.Background(), testRecord(n, checkpointDims)); err != nil {
		t.Fatal(err)
	}
}

// Checkpoint does not fail when the background checkpointer is running: SQLite
// refuses a second checkpoint at once, without waiting.
func TestEmbeddedCheckpointBesideBackgroundCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	s, err := embedded.New(embedded.Config{Path: path, Dimensions: checkpointDims, CheckpointInterval: time.Millisecond, WALRestartPages: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for range 50 {
		upsertBatches(t, s, 4)
		if err := s.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
