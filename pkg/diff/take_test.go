package diff

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// Take reads one user's Markdown files, less the backups and stamps, and
// every one of the user's vector memories, across Scroll's pages, and none of
// another user's.
func TestTake(t *testing.T) {
	ctx := context.Background()
	fsb, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := docstore.New(docstore.Config{}, fsb, nil)
	if err != nil {
		t.Fatal(err)
	}
	vectors, err := embedded.New(embedded.Config{Path: embedded.MemoryPath, Dimensions: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vectors.Close() })

	u1, u2 := docstore.Namespace{Tenant: "acme", User: "u1"}, docstore.Namespace{Tenant: "acme", User: "u2"}
	for _, w := range []struct {
		ns         docstore.Namespace
		name, text string
	}{{u1, "MEMORY.md", "first\n"}, {u1, "MEMORY.md", "mine\n"}, {u1, "202611/20261128.md", "today\n"}, {u2, "MEMORY.md", "theirs\n"}} {
		if _, err := docs.Replace(ctx, w.ns, w.name, []byte(w.text)); err != nil {
			t.Fatal(err)
		}
	}
	if err := docs.SetLastLongTermCompress(ctx, u1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if backups, err := docs.Backups(ctx, u1); err != nil || len(backups) != 1 {
		t.Fatalf("backups %v (%v): the test needs one to skip", backups, err)
	}

	// More than a page of Scroll (256), so Take must follow the offset.
	var want []Memory
	var recs []vectorstore.Record
	for i := range 300 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		recs = append(recs, vectorstore.Record{ID: id, Tenant: "acme", UserID: "u1", MemoryType: "episodic", Text: fmt.Sprint("m", i), Vector: []float32{1, 0}, TS: time.Now(),
			Metadata: map[string]any{"context": "c", "source_event_ids": []string{fmt.Sprint("e", i)}}})
		want = append(want, Memory{ID: id, Type: "episodic", Text: fmt.Sprint("m", i), Context: "c", SourceEventIDs: []string{fmt.Sprint("e", i)}})
	}
	recs = append(recs, vectorstore.Record{ID: "00000000-0000-4000-8000-999999999999", Tenant: "acme", UserID: "u2", MemoryType: "episodic", Text: "theirs", Vector: []float32{1, 0}, TS: time.Now()})
	if err := vectors.Upsert(ctx, recs...); err != nil {
		t.Fatal(err)
	}

	s, err := Take(ctx, docs, vectors, "acme", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if wantFiles := map[string]string{"MEMORY.md": "mine\n", "202611/20261128.md": "today\n"}; !reflect.DeepEqual(s.Files, wantFiles) {
		t.Fatalf("files %v, want %v", s.Files, wantFiles)
	}
	if !reflect.DeepEqual(s.Memories, want) {
		t.Fatalf("%d memories, want %d (first %+v)", len(s.Memories), len(want), s.Memories[:min(1, len(s.Memories))])
	}
}
