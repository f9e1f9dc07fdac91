package embedded

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const loadedFromFile = "partition loaded from its partition file"

// openPartStore opens the store at path with partition files for partitions of
// at least min records, logging to the observer it returns, and waits for its
// preload.
func openPartStore(t interface{ Fatal(...any) }, path string, min int) (*Store, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	s, err := New(Config{Path: path, Dimensions: loadTestDims, ANNThreshold: -1, PartitionFileMin: min}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if s.b.preloadDone != nil {
		<-s.b.preloadDone
	}
	return s, logs
}

// copyFile copies src to dst, a new file (another inode).
func copyFile(t interface{ Fatal(...any) }, src, dst string) {
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A partition loaded from its partition file after a restart holds exactly
// what the same partition loaded from the database holds (records, vectors
// bit for bit, metadata, terms, keyword statistics), and ranks every search
// the same; the file was used, and is gone once loaded.
func TestPropertyPartitionFileIsTheLoadedPartition(t *testing.T) {
	newPath := storePaths(t)
	vocabulary := []string{"tea", "coffee", "the", "budget", "paris", "trains", "東京", "dog", "running", "a"}
	rapid.Check(t, func(t *rapid.T) {
		path := newPath(t)
		dir := filepath.Dir(path)
		defer os.RemoveAll(dir)
		ctx := context.Background()
		s, _ := openPartStore(t, path, 1)
		defer func() { s.Close() }()
		word := rapid.SampledFrom(vocabulary)
		vec := rapid.SliceOfN(rapid.Float32Range(-1, 1), loadTestDims, loadTestDims)
		n := rapid.IntRange(1, 200).Draw(t, "records")
		var recs []vectorstore.Record
		for i := range n {
			r := loadTestRecord(i, rapid.SliceOfN(word, 0, 6).Draw(t, "words"), vec.Draw(t, "v"), rapid.SampledFrom(memoryTypes).Draw(t, "type"))
			r.Scope, r.Kind, r.Key = rapid.SampledFrom([]string{"", "user"}).Draw(t, "scope"), rapid.SampledFrom([]string{"", "pref"}).Draw(t, "kind"), fmt.Sprint(i%3)
			r.ChatID, r.Who = rapid.SampledFrom([]string{"", "c1"}).Draw(t, "chat"), rapid.SampledFrom([]string{"", "me"}).Draw(t, "who")
			r.HitCount, r.Confidence = rapid.IntRange(0, 5).Draw(t, "hits"), rapid.Float64Range(0, 1).Draw(t, "conf")
			if rapid.Bool().Draw(t, "expires") {
				r.ExpiresAt = time.UnixMicro(int64(1e15 + rapid.IntRange(-5, 5).Draw(t, "exp")*1e9))
			}
			if rapid.Bool().Draw(t, "no metadata") {
				r.Metadata = nil
			}
			recs = append(recs, r)
		}
		if err := s.Upsert(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		deleted := map[int]bool{}
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, n-1), 0, 10).Draw(t, "deleted") {
			if _, err := s.Delete(ctx, "acme", "u1", recs[i].ID); err != nil {
				t.Fatal(err)
			}
			deleted[i] = true
		}
		conf := 0.25
		if _, err := s.UpdatePayloads(ctx, "acme", "u1", map[string]vectorstore.Patch{recs[0].ID: {HitCountDelta: 2, Confidence: &conf, Metadata: map[string]any{"x": "y"}}}); err != nil {
			t.Fatal(err)
		}
		entriesOf(t, s, loadTestKey) // loaded, so Close writes its file
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		refPath := filepath.Join(dir, "ref.db")
		copyFile(t, path, refPath) // another file: its partition loads from the database
		var logs *observer.ObservedLogs
		s, logs = openPartStore(t, path, 1)
		if used, want := logs.FilterMessage(loadedFromFile).Len(), min(1, n-len(deleted)); used != want {
			t.Fatalf("loaded from a file %d times, want %d (a partition with records): %v", used, want, logs.All())
		}
		if _, err := os.Stat(partDir(path)); !os.IsNotExist(err) {
			t.Fatalf("the partition files are still there after the start: %v", err)
		}
		ref, refLogs := openPartStore(t, refPath, 1)
		defer ref.Close()
		got, gotStats := entriesOf(t, s, loadTestKey)
		want, wantStats := entriesOf(t, ref, loadTestKey)
		if refLogs.FilterMessage(loadedFromFile).Len() != 0 {
			t.Fatal("the reference was loaded from a file")
		}
		if !reflect.DeepEqual(got, want) {
			for id, e := range want {
				if !reflect.DeepEqual(got[id], e) {
					t.Fatalf("record %s: from the file %+v, want %+v", id, got[id], e)
				}
			}
			t.Fatalf("from the file %d records, want %d", len(got), len(want))
		}
		if gotStats != wantStats {
			t.Fatalf("keyword statistics (tokens, live docs): from the file %v, want %v", gotStats, wantStats)
		}
		depth := rapid.IntRange(1, 40).Draw(t, "depth")
		for _, q := range []vectorstore.Query{
			{Text: word.Draw(t, "q1") + " " + word.Draw(t, "q2"), Mode: vectorstore.Sparse},
			{Text: word.Draw(t, "q3"), Mode: vectorstore.Sparse, Filter: vectorstore.Filter{MemoryTypes: []vectorstore.MemoryType{vectorstore.Semantic}, Scope: "user"}},
			{Vector: vec.Draw(t, "qv"), Mode: vectorstore.Dense},
		} {
			q.Filter.Tenant, q.Filter.UserID, q.Limit = "acme", "u1", depth
			if got, want := hitStrings(t, s, q), hitStrings(t, ref, q); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s search: from the file\n%v\nwant\n%v", q.Mode, got, want)
			}
		}
		all := vectorstore.Filter{Tenant: "acme", UserID: "u1", IncludeExpired: true}
		recsGot, _, err := s.Scroll(ctx, all, "", n)
		if err != nil {
			t.Fatal(err)
		}
		recsWant, _, err := ref.Scroll(ctx, all, "", n)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(recsGot, recsWant) {
			t.Fatalf("Get: from the file\n%v\nwant\n%v", recsGot, recsWant)
		}
	})
}

// partFileStore writes n records of loadTestKey, reads them and closes the
// store, which leaves a partition file and its MANIFEST.
func partFileStore(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vectors.db")
	s, _ := openPartStore(t, path, 1)
	var recs []vectorstore.Record
	for i := range n {
		recs = append(recs, loadTestRecord(i, []string{"tea", "budget"}, loadTestVector(i), vectorstore.Episodic))
	}
	if err := s.Upsert(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	entriesOf(t, s, loadTestKey)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{partManifest(path), partFile(path, loadTestKey)} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("Close left no %s: %v", f, err)
		}
	}
	return path
}

// A partition file is used only while it is the database's: after a write to
// the database by another process, a replaced database file, damage, or with
// the MANIFEST of another close, the partition is loaded from the database
// (and holds what the database holds), and the file is removed all the same.
func TestPartitionFileUsedOnlyWhenTrusted(t *testing.T) {
	const n = 50
	firstID := loadTestRecord(0, nil, nil, "").ID
	cases := []struct {
		name   string
		change func(t *testing.T, path string)
		used   bool
		text   string // of the first record after the start
	}{
		{name: "as closed", change: func(*testing.T, string) {}, used: true, text: "tea budget"},
		{name: "the database written by another process", change: func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`UPDATE records SET text = 'changed' WHERE id = ?`, firstID); err != nil {
				t.Fatal(err)
			}
		}, text: "changed"},
		{name: "the database file replaced by a copy", change: func(t *testing.T, path string) {
			copyFile(t, path, path+".copy")
			if err := os.Rename(path+".copy", path); err != nil {
				t.Fatal(err)
			}
		}, text: "tea budget"},
		{name: "a byte of the file flipped", change: func(t *testing.T, path string) {
			f := partFile(path, loadTestKey)
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(data, []byte("tea budget"))
			data[i] = 'T' // a text the load would keep, were the checksum not checked
			if err := os.WriteFile(f, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, text: "tea budget"},
		{name: "the MANIFEST of another close", change: func(t *testing.T, path string) {
			m, err := os.ReadFile(partManifest(path))
			if err != nil {
				t.Fatal(err)
			}
			tok := len(partManifestMagic) + 32
			m[tok] ^= 1 // another token, checksum fixed: a MANIFEST that matches the database
			m = binary.LittleEndian.AppendUint32(m[:len(m)-4], crc32.Checksum(m[:len(m)-4], crcTable))
			if err := os.WriteFile(partManifest(path), m, 0o600); err != nil {
				t.Fatal(err)
			}
		}, text: "tea budget"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := partFileStore(t, n)
			c.change(t, path)
			s, logs := openPartStore(t, path, 1)
			defer s.Close()
			if used := logs.FilterMessage(loadedFromFile).Len() == 1; used != c.used {
				t.Fatalf("file used: %v, want %v (%v)", used, c.used, logs.All())
			}
			got, _ := entriesOf(t, s, loadTestKey)
			if len(got) != n || got[firstID].rec.Text != c.text {
				t.Fatalf("%d records, the first's text %q; want %d, %q", len(got), got[firstID].rec.Text, n, c.text)
			}
			if _, err := os.Stat(partDir(path)); !os.IsNotExist(err) {
				t.Fatalf("the partition files are still there after the start: %v", err)
			}
		})
	}
}

// A write beginning while partition files are trusted makes them untrusted: it
// may change a partition whose file is not loaded yet.
func TestAWriteDistrustsPartitionFiles(t *testing.T) {
	s, _ := openPartStore(t, filepath.Join(t.TempDir(), "vectors.db"), 1)
	defer s.Close()
	s.b.writeMu.Lock()
	s.b.partFiles = &partFiles{keys: map[partKey]bool{loadTestKey: true}}
	s.b.writeMu.Unlock()
	other := loadTestRecord(1, []string{"tea"}, loadTestVector(1), vectorstore.Episodic)
	other.UserID = "u2"
	if err := s.Upsert(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	s.b.writeMu.Lock()
	defer s.b.writeMu.Unlock()
	if s.b.partFiles != nil {
		t.Fatal("the partition files are still trusted after a write")
	}
}

// partFileBody is a partition file of a few records and its key: the bytes
// after the magic, without the checksum.
func partFileBody(t testing.TB) []byte {
	p := newPartition(loadTestKey, 0)
	for i := range 5 {
		r := loadTestRecord(i, []string{"tea", "budget"}, loadTestVector(i), memoryTypes[i%3])
		if i%2 == 0 {
			r.ExpiresAt = time.UnixMicro(2e15)
		}
		p.put(newEntry(int64(i+1), storedForm(r), `{"i":1}`))
	}
	var b bytes.Buffer
	if err := p.encodePartFile(&b, 42, loadTestDims); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()[len(partFileMagic) : b.Len()-4]
}

// Whatever a partition file holds, decoding it never panics, and what decodes
// is entries with vectors of the store's dimensions. The input is a file's
// body: the magic and its checksum are added, so the fuzzer reaches the parser
// rather than the checksum's refusal.
func FuzzDecodePartFile(f *testing.F) {
	f.Add(partFileBody(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		data := append([]byte(partFileMagic), body...)
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, crcTable))
		ents, err := decodePartFile(bytes.NewReader(data), loadTestKey, 42, loadTestDims)
		if err != nil {
			return
		}
		p := newPartition(loadTestKey, 0)
		for _, e := range ents {
			if len(e.rec.Vector) != loadTestDims {
				t.Fatalf("a vector of %d dimensions", len(e.rec.Vector))
			}
			p.put(e)
		}
		sparseRanking(p, queryTerms([]string{"tea"}, nil), newMatcher(vectorstore.Filter{IncludeExpired: true}, time.Time{}), 10)
	})
}

// The decoder refuses a file of another partition, token or dimension count,
// and a truncated one.
func TestPartitionFileRefusesOthers(t *testing.T) {
	body := partFileBody(t)
	file := append([]byte(partFileMagic), body...)
	file = binary.LittleEndian.AppendUint32(file, crc32.Checksum(body, crcTable))
	decode := func(data []byte, k partKey, token uint64, dims int) error {
		_, err := decodePartFile(bytes.NewReader(data), k, token, dims)
		return err
	}
	if err := decode(file, loadTestKey, 42, loadTestDims); err != nil {
		t.Fatalf("the file as written: %v", err)
	}
	for name, err := range map[string]error{
		"another user":     decode(file, partKey{"acme", "u2"}, 42, loadTestDims),
		"another token":    decode(file, loadTestKey, 43, loadTestDims),
		"other dimensions": decode(file, loadTestKey, 42, loadTestDims+1),
		"truncated":        decode(file[:len(file)-1], loadTestKey, 42, loadTestDims),
		"trailing bytes":   decode(append(slices.Clone(file), 0), loadTestKey, 42, loadTestDims),
		"another version":  decode(append([]byte("AMPART\x00\x02"), file[len(partFileMagic):]...), loadTestKey, 42, loadTestDims),
		"empty":            decode(nil, loadTestKey, 42, loadTestDims),
	} {
		if !errors.Is(err, ErrPartitionFile) {
			t.Errorf("%s: got %v, want ErrPartitionFile", name, err)
		}
	}
}

// Whatever a MANIFEST holds, decoding it never panics, and one that decodes
// names only partitions it holds. The input is the MANIFEST's body after the
// database's identity; the rest is added so that the fuzzer reaches the parser.
func FuzzDecodeManifest(f *testing.F) {
	id := dbIdentity{dev: 1, ino: 2, size: 3, mtime: 4}
	b := binary.LittleEndian.AppendUint64(nil, 42)
	b = binary.LittleEndian.AppendUint32(b, 1)
	f.Add(appendString(appendString(b, "acme"), "u1"))
	f.Fuzz(func(t *testing.T, body []byte) {
		data := append(id.append([]byte(partManifestMagic)), body...)
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, crcTable))
		pf, err := decodeManifest(data, id, true)
		if err != nil {
			return
		}
		if len(pf.keys) > len(body)/8 {
			t.Fatalf("%d partitions out of %d bytes", len(pf.keys), len(body))
		}
		if _, err := decodeManifest(data, dbIdentity{dev: 1, ino: 2, size: 3, mtime: 5}, true); err == nil {
			t.Fatal("a MANIFEST of another database file decoded")
		}
	})
}

// A partition loaded from its file at the start is bounded like any other: the
// preload leaves it unpinned, so reading another partition past
// MaxLoadedRecords evicts it.
func TestPreloadedPartitionIsEvictable(t *testing.T) {
	const n = 50
	path := partFileStore(t, n)
	s, err := New(Config{Path: path, Dimensions: loadTestDims, ANNThreshold: -1, PartitionFileMin: 1, MaxLoadedRecords: n - 1}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-s.b.preloadDone
	if got := s.LoadedRecords(); got != n {
		t.Fatalf("%d records loaded after the preload, want the file's %d", got, n)
	}
	other := loadTestRecord(n, []string{"coffee"}, loadTestVector(n), vectorstore.Episodic)
	other.UserID = "u2"
	if err := s.Upsert(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	u2 := partKey{loadTestKey.tenant, "u2"}
	if got, _ := entriesOf(t, s, u2); len(got) != 1 {
		t.Fatalf("u2 holds %d records, want 1", len(got))
	}
	s.b.cacheMu.RLock()
	_, preloaded := s.b.parts[loadTestKey]
	s.b.cacheMu.RUnlock()
	if preloaded || s.LoadedRecords() != 1 || s.Evictions() != 1 {
		t.Fatalf("after reading u2: preloaded partition still loaded %v, %d records loaded, %d evictions; want it evicted, 1, 1",
			preloaded, s.LoadedRecords(), s.Evictions())
	}
}
