package transfer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
)

var embedder = events.EmbedderInfo{Model: "local-hash-v2-384", Dimensions: 3}

// sample is a small valid archive: two users, one with an empty file.
func sample(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, "acme", embedder, time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.User("u1"))
	must(w.File("MEMORY.md", []byte("# memory\n")))
	must(w.File("user_prefs.md", nil))
	must(w.Record(events.Record{ID: "6f0b7f3e-2d0c-5a4e-9b1d-8c3f4e5a6b70", MemoryType: events.MemoryEpisodic, Text: "a", Vector: []float32{1, 0, 0}}))
	must(w.Record(events.Record{ID: "6f0b7f3e-2d0c-5a4e-9b1d-8c3f4e5a6b71", MemoryType: events.MemoryItemType, Text: "b", Vector: []float32{0, 1, 0}}))
	must(w.Session(events.SessionKV{Kind: events.SessionKVState, SessionID: "s1", Value: json.RawMessage(`{"messages":1}`)}))
	must(w.User("empty")) // nothing of it: not in the manifest
	must(w.User("u2"))
	must(w.Session(events.SessionKV{Kind: events.SessionKVTurn, SessionID: "s1", TurnID: "t1", Value: json.RawMessage(`{}`)}))
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestArchiveRoundTrip(t *testing.T) {
	var got []Entry
	m, err := Read(bytes.NewReader(sample(t)), func(e Entry) error { got = append(got, e); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []UserCounts{{User: "u1", Files: 2, Bytes: 9, Records: 2, Items: 1, Sessions: 1}, {User: "u2", Sessions: 1}}
	if m.Format != Format || m.Version != Version || m.Tenant != "acme" || m.Embedder != embedder || len(m.Users) != 2 || m.Users[0] != want[0] || m.Users[1] != want[1] {
		t.Fatalf("manifest = %+v", m)
	}
	if len(got) != 6 || got[0].File.Name != "MEMORY.md" || string(got[0].File.Data) != "# memory\n" || got[1].File.Name != "user_prefs.md" ||
		got[3].Record.Text != "b" || got[4].Session.SessionID != "s1" || got[5].User != "u2" || got[5].Session.TurnID != "t1" {
		t.Fatalf("entries = %+v", got)
	}
}

// rawArchive writes entries (name, content) as a gzipped tar as they are.
func rawArchive(t testing.TB, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e[0], Mode: 0o644, Size: int64(len(e[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func manifestJSON(version int, users string) string {
	return `{"format":"agentmem-export","version":` + string(rune('0'+version)) + `,"tenant":"acme","embedder":{"model":"m","dimensions":3},"users":` + users + `}`
}

// A corrupt, truncated or foreign archive is an error wrapping ErrArchive that
// says what is wrong, never a panic and never a partial read reported as fine.
func TestReadRejects(t *testing.T) {
	good := sample(t)
	record := `{"id":"6f0b7f3e-2d0c-5a4e-9b1d-8c3f4e5a6b70","memory_type":"episodic","text":"a","vector":[1,0,0],"ts":"2026-11-25T00:00:00Z"}`
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"not gzip", []byte("PK\x03\x04 a zip file"), "not a gzip file"},
		{"truncated", good[:len(good)/2], "unexpected EOF"},
		{"no manifest", rawArchive(t, [2]string{"users/u1/files/MEMORY.md", "x"}), "no manifest.json"},
		{"newer version", rawArchive(t, [2]string{"manifest.json", manifestJSON(2, "[]")}), "format version 2; this agentmem reads version 1"},
		{"other format", rawArchive(t, [2]string{"manifest.json", `{"format":"tarball","version":1}`}), `format "tarball"`},
		{"manifest not JSON", rawArchive(t, [2]string{"manifest.json", "{"}), "manifest.json"},
		{"escaping name", rawArchive(t, [2]string{"users/u1/files/../../../etc/passwd", "x"}), "is not users/<user>/"},
		{"not a layout file", rawArchive(t, [2]string{"users/u1/files/notes.txt", "x"}), "not a file of the memory layout"},
		{"bad user", rawArchive(t, [2]string{"users/u.1/records.jsonl", record}), "user"},
		{"unknown section", rawArchive(t, [2]string{"users/u1/vectors.bin", "x"}), "neither files/"},
		{"bad line", rawArchive(t, [2]string{"users/u1/records.jsonl", "{not json\n"}), "records.jsonl line 1"},
		{"unknown field", rawArchive(t, [2]string{"users/u1/records.jsonl", `{"id":"x","surprise":1}`}), "unknown field"},
		{"record without vector", rawArchive(t, [2]string{"users/u1/records.jsonl", `{"id":"x","memory_type":"episodic","text":"a"}`}), "needs an id and a vector"},
		{"bad session kind", rawArchive(t, [2]string{"users/u1/sessions.jsonl", `{"kind":"cookie","session_id":"s1","value":{}}`}), "kind"},
		{"counts differ", rawArchive(t, [2]string{"users/u1/records.jsonl", record + "\n"}, [2]string{"manifest.json", manifestJSON(1, `[{"user":"u1","records":2}]`)}), "do not match"},
		{"entry after manifest", rawArchive(t, [2]string{"manifest.json", manifestJSON(1, "[]")}, [2]string{"users/u1/records.jsonl", record}), "after manifest.json"},
		{"section twice", rawArchive(t, [2]string{"users/u1/records.jsonl", record}, [2]string{"users/u1/records.jsonl", record}), "appears twice"},
		{"user split", rawArchive(t, [2]string{"users/u1/records.jsonl", record}, [2]string{"users/u2/records.jsonl", record}, [2]string{"users/u1/sessions.jsonl", ""}), "not together"},
		{"file after records", rawArchive(t, [2]string{"users/u1/records.jsonl", record}, [2]string{"users/u1/files/MEMORY.md", "x"}), "after the user's records"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.data), nil)
			if !errors.Is(err, ErrArchive) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Read = %v; want ErrArchive saying %q", err, c.want)
			}
		})
	}
}

// A failing visit stops the read with its own error.
func TestReadStopsOnVisitError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	_, err := Read(bytes.NewReader(sample(t)), func(Entry) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Read = %v after %d entries", err, n)
	}
}

// FuzzRead: whatever the bytes, Read returns (no panic, bounded memory); an
// error wraps ErrArchive; an archive it accepts holds exactly what its
// manifest counts.
func FuzzRead(f *testing.F) {
	good := sample(f)
	f.Add(good)
	f.Add(good[:len(good)-10])
	f.Add(rawArchive(f, [2]string{"manifest.json", manifestJSON(1, "[]")}))
	f.Add(rawArchive(f, [2]string{"users/u1/sessions.jsonl", `{"kind":"state","session_id":"s1","value":{}}` + "\n"}, [2]string{"manifest.json", manifestJSON(1, `[{"user":"u1","sessions":1}]`)}))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		seen := map[string]*UserCounts{}
		m, err := Read(bytes.NewReader(data), func(e Entry) error {
			c := seen[e.User]
			if c == nil {
				c = &UserCounts{User: e.User}
				seen[e.User] = c
			}
			switch {
			case e.File != nil:
				c.Files++
			case e.Record != nil:
				c.Records++
			default:
				c.Sessions++
			}
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrArchive) {
				t.Fatalf("error %v does not wrap ErrArchive", err)
			}
			return
		}
		if len(m.Users) != len(seen) {
			t.Fatalf("manifest lists %d users, the archive holds %d", len(m.Users), len(seen))
		}
		for _, u := range m.Users {
			c := seen[u.User]
			if c == nil || c.Files != u.Files || c.Records != u.Records || c.Sessions != u.Sessions {
				t.Fatalf("manifest %+v, entries %+v", u, c)
			}
		}
	})
}
