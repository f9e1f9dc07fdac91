package transfer

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
)

// The archive (agentmem export): a gzipped tar of
//
//	users/<user>/files/<name>       each file of the memory layout, as stored
//	users/<user>/records.jsonl      one events.Record a line, vector included
//	users/<user>/sessions.jsonl     one events.SessionKV a line
//	manifest.json                   Manifest, last: it holds the counts
//
// Entries of a user come together, in that order.

// Format names the archive format in its manifest; Version is the format
// version this build writes and reads.
const (
	Format  = "agentmem-export"
	Version = 1
)

// ErrArchive reports an archive that cannot be read: not a gzipped tar, a
// manifest of another format or version, an entry outside the layout, counts
// that do not match.
var ErrArchive = errors.New("transfer: invalid archive")

// Limits of the reader, so that a corrupt or hostile archive cannot make it
// allocate without bound.
const (
	maxEntryBytes = 256 << 20 // one file of the memory layout
	maxLineBytes  = 64 << 20  // one record or session value
)

// Manifest describes an archive.
type Manifest struct {
	Format   string              `json:"format"`
	Version  int                 `json:"version"`
	Created  time.Time           `json:"created"`
	Tenant   string              `json:"tenant"`
	Embedder events.EmbedderInfo `json:"embedder"`
	Users    []UserCounts        `json:"users"`
}

// UserCounts is what the archive holds of one user.
type UserCounts struct {
	User     string `json:"user"`
	Files    int    `json:"files"`
	Bytes    int64  `json:"bytes"` // of the files
	Records  int    `json:"records"`
	Items    int    `json:"items"` // of the records
	Sessions int    `json:"sessions"`
}

// Totals sums the users' counts.
func (m Manifest) Totals() UserCounts {
	var t UserCounts
	for _, u := range m.Users {
		t.Files += u.Files
		t.Bytes += u.Bytes
		t.Records += u.Records
		t.Items += u.Items
		t.Sessions += u.Sessions
	}
	return t
}

// Writer writes an archive: per user, files, then records, then sessions; Close
// writes the manifest.
type Writer struct {
	gz       *gzip.Writer
	tw       *tar.Writer
	manifest Manifest
	user     *UserCounts
	section  string
	buf      bytes.Buffer // the open JSON-lines section
}

// NewWriter starts an archive of tenant's memory made with embedder on w.
func NewWriter(w io.Writer, tenant string, embedder events.EmbedderInfo, now time.Time) *Writer {
	gz := gzip.NewWriter(w)
	return &Writer{gz: gz, tw: tar.NewWriter(gz), manifest: Manifest{
		Format: Format, Version: Version, Created: now.UTC(), Tenant: tenant, Embedder: embedder,
	}}
}

// User starts the entries of user.
func (w *Writer) User(user string) error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := events.ValidateID("user", user); err != nil {
		return fmt.Errorf("transfer: %w", err)
	}
	w.manifest.Users = append(w.manifest.Users, UserCounts{User: user})
	w.user = &w.manifest.Users[len(w.manifest.Users)-1]
	return nil
}

// File adds one file of the current user.
func (w *Writer) File(name string, data []byte) error {
	if w.user == nil || w.section != "" {
		return errors.New("transfer: File outside a user's files")
	}
	if err := w.entry("users/"+w.user.User+"/files/"+name, data); err != nil {
		return err
	}
	w.user.Files++
	w.user.Bytes += int64(len(data))
	return nil
}

// Record adds one record of the current user.
func (w *Writer) Record(r events.Record) error {
	if err := w.line(sectionRecords, r); err != nil {
		return err
	}
	w.user.Records++
	if r.MemoryType == events.MemoryItemType {
		w.user.Items++
	}
	return nil
}

// Session adds one session value of the current user.
func (w *Writer) Session(e events.SessionKV) error {
	if err := w.line(sectionSessions, e); err != nil {
		return err
	}
	w.user.Sessions++
	return nil
}

const (
	sectionRecords  = "records.jsonl"
	sectionSessions = "sessions.jsonl"
)

// line appends v to section of the current user; the section is written as
// one entry when the next one starts (tar needs an entry's size first).
func (w *Writer) line(section string, v any) error {
	if w.user == nil {
		return errors.New("transfer: entry before a user")
	}
	if w.section != section {
		if w.section == sectionSessions && section == sectionRecords {
			return errors.New("transfer: records after sessions")
		}
		if err := w.flush(); err != nil {
			return err
		}
		w.section = section
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("transfer: encode %s: %w", section, err)
	}
	w.buf.Write(data)
	w.buf.WriteByte('\n')
	return nil
}

// flush writes the open section.
func (w *Writer) flush() error {
	if w.section == "" {
		return nil
	}
	err := w.entry("users/"+w.user.User+"/"+w.section, w.buf.Bytes())
	w.buf.Reset()
	w.section = ""
	return err
}

func (w *Writer) entry(name string, data []byte) error {
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: w.manifest.Created, Typeflag: tar.TypeReg}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("transfer: write %s: %w", name, err)
	}
	if _, err := w.tw.Write(data); err != nil {
		return fmt.Errorf("transfer: write %s: %w", name, err)
	}
	return nil
}

// Close writes the manifest and ends the archive; it returns the manifest.
func (w *Writer) Close() (Manifest, error) {
	if err := w.flush(); err != nil {
		return w.manifest, err
	}
	// A user with nothing to export has no entries; the manifest lists what
	// the archive holds.
	users := []UserCounts{}
	for _, u := range w.manifest.Users {
		if u != (UserCounts{User: u.User}) {
			users = append(users, u)
		}
	}
	w.manifest.Users = users
	data, err := json.MarshalIndent(w.manifest, "", "  ")
	if err != nil {
		return w.manifest, err
	}
	if err := w.entry("manifest.json", data); err != nil {
		return w.manifest, err
	}
	if err := w.tw.Close(); err != nil {
		return w.manifest, fmt.Errorf("transfer: close archive: %w", err)
	}
	return w.manifest, w.gz.Close()
}

// Entry is one thing an archive holds of a user: a file, a record or a session
// value (one of them set).
type Entry struct {
	User    string
	File    *events.FileChunk // Offset 0, the whole file
	Record  *events.Record
	Session *events.SessionKV
}

// Read reads a whole archive from r, calls visit (when not nil) with each entry
// in archive order, and returns the manifest once everything is checked:
// gzip and tar framing, every entry name and line, the manifest's format and
// version, and its counts against what the archive holds. Errors wrap
// ErrArchive and say what is wrong and where; an error of visit is returned
// as it is. Import reads an archive twice: once to check it (visit nil), then
// to import it, so that a corrupt archive imports nothing.
func Read(r io.Reader, visit func(Entry) error) (Manifest, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: not a gzip file: %w", ErrArchive, err)
	}
	defer func() { _ = gz.Close() }()
	tr := tar.NewReader(gz)
	var (
		m        *Manifest
		seen     []UserCounts
		cur      *UserCounts
		sections = map[string]bool{}
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("%w: %w", ErrArchive, err)
		}
		if m != nil {
			return Manifest{}, fmt.Errorf("%w: entry %q after manifest.json, which must be last", ErrArchive, hdr.Name)
		}
		if hdr.Typeflag != tar.TypeReg {
			return Manifest{}, fmt.Errorf("%w: entry %q is not a regular file", ErrArchive, hdr.Name)
		}
		if hdr.Size < 0 || hdr.Size > maxEntryBytes {
			return Manifest{}, fmt.Errorf("%w: entry %q has %d bytes; at most %d", ErrArchive, hdr.Name, hdr.Size, maxEntryBytes)
		}
		if hdr.Name == "manifest.json" {
			if m, err = readManifest(tr); err != nil {
				return Manifest{}, err
			}
			continue
		}
		user, rest, err := splitEntryName(hdr.Name)
		if err != nil {
			return Manifest{}, err
		}
		if cur == nil || cur.User != user {
			if slices.ContainsFunc(seen, func(u UserCounts) bool { return u.User == user }) {
				return Manifest{}, fmt.Errorf("%w: entries of user %q are not together", ErrArchive, user)
			}
			seen = append(seen, UserCounts{User: user})
			cur = &seen[len(seen)-1]
			clear(sections)
		}
		if sections[rest] {
			return Manifest{}, fmt.Errorf("%w: entry %q appears twice", ErrArchive, hdr.Name)
		}
		sections[rest] = true
		if err := readEntry(tr, hdr.Name, user, rest, cur, visit); err != nil {
			return Manifest{}, err
		}
	}
	if m == nil {
		return Manifest{}, fmt.Errorf("%w: no manifest.json (a truncated archive?)", ErrArchive)
	}
	if !slices.Equal(m.Users, seen) {
		return Manifest{}, fmt.Errorf("%w: the manifest's counts %+v do not match the entries %+v", ErrArchive, m.Users, seen)
	}
	return *m, nil
}

func readManifest(r io.Reader) (*Manifest, error) {
	var m Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest.json: %w", ErrArchive, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: manifest.json: format %q, want %q", ErrArchive, m.Format, Format)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("%w: manifest.json: format version %d; this agentmem reads version %d", ErrArchive, m.Version, Version)
	}
	if err := events.ValidateID("tenant", m.Tenant); err != nil {
		return nil, fmt.Errorf("%w: manifest.json: %w", ErrArchive, err)
	}
	if m.Embedder.Dimensions < 1 {
		return nil, fmt.Errorf("%w: manifest.json: embedder dimensions %d", ErrArchive, m.Embedder.Dimensions)
	}
	if m.Users == nil {
		m.Users = []UserCounts{}
	}
	return &m, nil
}

// splitEntryName splits "users/<user>/<rest>" and checks both parts.
func splitEntryName(name string) (user, rest string, err error) {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) != 3 || parts[0] != "users" || path.Clean(name) != name {
		return "", "", fmt.Errorf("%w: entry %q is not users/<user>/… or manifest.json", ErrArchive, name)
	}
	if err := events.ValidateID("user", parts[1]); err != nil {
		return "", "", fmt.Errorf("%w: entry %q: %w", ErrArchive, name, err)
	}
	rest = parts[2]
	if f, ok := strings.CutPrefix(rest, "files/"); ok {
		if err := docstore.ValidateName(f); err != nil {
			return "", "", fmt.Errorf("%w: entry %q: %w", ErrArchive, name, err)
		}
	} else if rest != sectionRecords && rest != sectionSessions {
		return "", "", fmt.Errorf("%w: entry %q is neither files/…, %s nor %s", ErrArchive, name, sectionRecords, sectionSessions)
	}
	return parts[1], rest, nil
}

// readEntry checks one entry of a user, counts it in cur and hands it to visit.
func readEntry(r io.Reader, name, user, rest string, cur *UserCounts, visit func(Entry) error) error {
	if file, ok := strings.CutPrefix(rest, "files/"); ok {
		if cur.Records > 0 || cur.Sessions > 0 {
			return fmt.Errorf("%w: file %q after the user's records or sessions", ErrArchive, name)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrArchive, name, err)
		}
		cur.Files++
		cur.Bytes += int64(len(data))
		if visit == nil {
			return nil
		}
		return visit(Entry{User: user, File: &events.FileChunk{Name: file, Data: data}})
	}
	if rest == sectionRecords && cur.Sessions > 0 {
		return fmt.Errorf("%w: %s after the user's sessions", ErrArchive, name)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	for line := 1; sc.Scan(); line++ {
		e, err := decodeLine(rest, sc.Bytes())
		if err != nil {
			return fmt.Errorf("%w: %s line %d: %w", ErrArchive, name, line, err)
		}
		if e.Record != nil {
			cur.Records++
			if e.Record.MemoryType == events.MemoryItemType {
				cur.Items++
			}
		} else {
			cur.Sessions++
		}
		if visit != nil {
			e.User = user
			if err := visit(e); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrArchive, name, err)
	}
	return nil
}

func decodeLine(section string, line []byte) (Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if section == sectionRecords {
		var r events.Record
		if err := dec.Decode(&r); err != nil {
			return Entry{}, err
		}
		if !slices.Contains([]events.MemoryType{events.MemoryEpisodic, events.MemorySemantic, events.MemoryItemType}, r.MemoryType) {
			return Entry{}, fmt.Errorf("memory_type %q is not episodic, semantic or item", r.MemoryType)
		}
		if r.ID == "" || len(r.Vector) == 0 {
			return Entry{}, errors.New("a record needs an id and a vector")
		}
		return Entry{Record: &r}, nil
	}
	var s events.SessionKV
	if err := dec.Decode(&s); err != nil {
		return Entry{}, err
	}
	if err := s.Validate(); err != nil {
		return Entry{}, err
	}
	return Entry{Session: &s}, nil
}
