package embedded

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Partition files: the large partitions in memory at Close, saved whole beside
// the database, so that the next New loads them from a flat file instead of
// SQLite. The first request of a partition's user after a restart waits for its
// load, and from SQLite that is 3.4–6.5 s of CPU at 100,000 records
// (BENCHMARKS.md, restart): SQLite's steps, the driver's copies and the
// tokenizing. A partition file holds each live entry as the partition holds it
// (its vector normalised, its metadata as stored JSON, its terms tokenized), so
// a load reads it in one pass with an allocation or two per record.
//
// A file must match the database exactly, or a search would answer from stale
// records, so it is trusted only when all of these hold:
//   - Close wrote it, then closed the database (which checkpoints the WAL and
//     removes it), and only then wrote the MANIFEST with the identity of the
//     database file (inode, size, modification time) and a random token that
//     every file of that Close carries;
//   - the next New finds the MANIFEST, the database file with that identity and
//     no WAL with frames in it, before it opens the database (so no process,
//     of this version or any other, wrote to it in between), and removes the
//     MANIFEST before anything else (so a crash from then on leaves nothing to
//     trust);
//   - no write transaction has begun since that New (writeTx calls
//     distrustPartFiles: a write may change a partition that is not loaded
//     yet, whose file would then be stale);
//   - the file is whole (CRC-32C), of this format version and tokenizer
//     (partTokenizer), dimension count and partition.
//
// Anything else is logged and ignored: the partition is loaded from SQLite, as
// without a file. Files are removed once the start-up has read them (New loads
// their partitions in the background, preloadPartFiles), so that the directory
// holds records only from a Close to the next New; an erasure while the store
// runs has no file to reach.

// partFileMagic starts every partition file, partManifestMagic the MANIFEST;
// their last bytes are the format's version.
const (
	partFileMagic     = "AMPART\x00\x01"
	partManifestMagic = "AMPMAN\x00\x01"
)

// DefaultPartitionFileMin is Config.PartitionFileMin's default. Below it a
// partition loads from SQLite in a fraction of a second (~35–60 ms of CPU per
// 1,000 records) and a file would be disk written at every Close for little.
const DefaultPartitionFileMin = 10000

// ErrPartitionFile is a partition file or MANIFEST that cannot be used:
// corrupt, truncated, stale, or of another partition, version, tokenizer or
// dimension. The store logs it and loads the partition from SQLite.
var ErrPartitionFile = errors.New("unusable partition file")

// maxPartRecordBytes bounds one record's encoding, so that a damaged length
// cannot make the decoder allocate without limit before the checksum fails.
const maxPartRecordBytes = 64 << 20

// partDir is where the partition files of the store at path live.
func partDir(path string) string { return path + ".parts" }

func partFile(path string, k partKey) string {
	return filepath.Join(partDir(path), partFileName(k)+".part")
}

func partManifest(path string) string { return filepath.Join(partDir(path), "MANIFEST") }

// partTokenizer fingerprints bm25.Tokenize, whose output the files keep: a file
// written by a binary whose tokenizer gives other terms for this probe (folding,
// stopwords, stemming, CJK bigrams, digits) is not used. A change of Tokenize
// the probe cannot see must change partFileMagic's version.
var partTokenizer = func() uint64 {
	terms := bm25.Tokenize("The Researchers' CAFÉ résumés: running 2019 columns, user's naïve 東京都 data-sets; I'm a B")
	h := fnv.New64a()
	_, _ = h.Write([]byte(strings.Join(terms, "\x00")))
	return h.Sum64()
}()

// partFiles are the partition files a New trusts (see the top of this file):
// the token of their Close and the partitions they hold. Guarded by writeMu.
type partFiles struct {
	token uint64
	keys  map[partKey]bool
}

// dbIdentity is what the MANIFEST records of the database file: any write to it
// by any process changes it (a checkpoint rewrites pages, so the modification
// time), or leaves a WAL with frames.
type dbIdentity struct {
	dev, ino uint64
	size     int64
	mtime    int64 // ns
}

func (id dbIdentity) append(b []byte) []byte {
	for _, v := range []uint64{id.dev, id.ino, uint64(id.size), uint64(id.mtime)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// currentIdentity is the database file's identity, ok false when it cannot be
// known (the platform keeps no inode, or the WAL holds frames).
func currentIdentity(path string) (dbIdentity, bool) {
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return dbIdentity{}, false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return dbIdentity{}, false
	}
	dev, ino, ok := fileIDs(fi)
	return dbIdentity{dev: dev, ino: ino, size: fi.Size(), mtime: fi.ModTime().UnixNano()}, ok
}

// takePartFiles reads and removes the MANIFEST before the database is opened,
// and returns the files it makes trusted, nil when there are none (every
// leftover file is then removed). Errors are logged: a start without files is
// only slower.
func (s *backend) takePartFiles() *partFiles {
	if s.cfg.Path == MemoryPath {
		return nil
	}
	mpath := partManifest(s.cfg.Path)
	data, err := os.ReadFile(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		s.removePartFiles()
		return nil
	}
	var pf *partFiles
	if err == nil {
		id, ok := currentIdentity(s.cfg.Path)
		pf, err = decodeManifest(data, id, ok)
	}
	// Removed before the database opens: from here on the files are this
	// start's only, whatever happens to the process.
	if rerr := os.Remove(mpath); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		s.logger.Warn("removing the partition files' MANIFEST; not using the files", zap.Error(rerr))
		pf, err = nil, nil
	}
	syncDir(partDir(s.cfg.Path))
	if err != nil {
		s.logger.Warn("partition files not used; their partitions load from the database", zap.Error(err))
	}
	if pf == nil {
		s.removePartFiles()
	}
	return pf
}

// decodeManifest parses a MANIFEST, which is valid only while the database file
// still has its identity (id, known: ok).
func decodeManifest(data []byte, id dbIdentity, ok bool) (*partFiles, error) {
	if len(data) < len(partManifestMagic)+4 || string(data[:len(partManifestMagic)]) != partManifestMagic {
		return nil, fmt.Errorf("%w: MANIFEST not of this version", ErrPartitionFile)
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, fmt.Errorf("%w: MANIFEST checksum mismatch", ErrPartitionFile)
	}
	r := &reader{b: body[len(partManifestMagic):]}
	want := string(id.append(nil))
	if got := string(r.take(len(want))); r.err == nil && (!ok || got != want) {
		return nil, fmt.Errorf("%w: the database changed since they were written", ErrPartitionFile)
	}
	pf := &partFiles{token: r.u64(), keys: map[partKey]bool{}}
	n := int(r.u32())
	if r.bad(n > len(r.b)/8, "MANIFEST size") {
		return nil, fmt.Errorf("%w: MANIFEST: %w", ErrPartitionFile, r.err)
	}
	for range n {
		pf.keys[partKey{r.str(), r.str()}] = true
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return pf, nil
}

// distrustPartFiles makes the partition files not loaded yet untrusted: a write
// is beginning, and may change their partitions. The caller holds writeMu.
func (s *backend) distrustPartFiles() { s.partFiles = nil }

// readPartFile returns the entries of k's trusted partition file, ok false when
// it has none (or it is unusable: logged). The caller holds writeMu.
func (s *backend) readPartFile(k partKey) (ents []*entry, ok bool) {
	if s.partFiles == nil || !s.partFiles.keys[k] {
		return nil, false
	}
	delete(s.partFiles.keys, k) // one load: later ones are of a partition since dropped
	f, err := os.Open(partFile(s.cfg.Path, k))
	if err == nil {
		ents, err = decodePartFile(bufio.NewReaderSize(f, 1<<20), k, s.partFiles.token, s.cfg.Dimensions)
		f.Close()
	}
	if err != nil {
		s.logger.Warn("partition file not used; the partition loads from the database", obs.Tenant(k.tenant), obs.User(k.userID), zap.Error(err))
		return nil, false
	}
	s.logger.Info("partition loaded from its partition file", obs.Tenant(k.tenant), obs.User(k.userID), zap.Int("records", len(ents)))
	return ents, true
}

// partRecordFixed is a record's fixed-size part: rid, ts, expires, hit count,
// confidence (8 bytes each), hasExpiry (1), and the lengths of its strings (4
// each).
const partRecordFixed = 5*8 + 1 + 4*partStrings

// partStrings is how many strings a record has: id, memory type, scope, kind,
// key, text, chat id, who, metadata and terms.
const partStrings = 10

// encodePartFile writes p's live entries to w: the header, each record with its
// length, and the CRC-32C of everything after the magic. The caller holds
// cacheMu (shared suffices).
func (p *partition) encodePartFile(w io.Writer, token uint64, dims int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	crc := crc32.New(crcTable)
	out := io.MultiWriter(bw, crc)
	b := []byte(partFileMagic)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	b = binary.LittleEndian.AppendUint64(b[:0], token)
	b = binary.LittleEndian.AppendUint64(b, partTokenizer)
	b = binary.LittleEndian.AppendUint32(b, uint32(dims))
	b = appendString(b, p.key.tenant)
	b = appendString(b, p.key.userID)
	b = binary.LittleEndian.AppendUint32(b, uint32(p.live))
	for _, e := range p.docs {
		if e == nil {
			continue
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
		b = appendPartRecord(b[:0], e)
	}
	if _, err := out.Write(b); err != nil {
		return err
	}
	if _, err := bw.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return err
	}
	return bw.Flush()
}

// appendPartRecord appends e's record: its length, the fixed part, the strings,
// the vector.
func appendPartRecord(b []byte, e *entry) []byte {
	r := &e.rec
	strs := [partStrings]string{r.ID, string(r.MemoryType), r.Scope, r.Kind, r.Key, r.Text, r.ChatID, r.Who, e.meta, e.terms}
	n := partRecordFixed + 4*len(r.Vector)
	for _, s := range strs {
		n += len(s)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for _, v := range []uint64{uint64(e.rid), uint64(e.ts), uint64(e.expires), uint64(r.HitCount), math.Float64bits(r.Confidence)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = append(b, 0)
	if e.hasExpiry {
		b[len(b)-1] = 1
	}
	for _, s := range strs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	}
	for _, s := range strs {
		b = append(b, s...)
	}
	return appendVector(b, r.Vector)
}

// crcReader reads exactly, keeping the CRC-32C of what it read.
type crcReader struct {
	r   io.Reader
	crc uint32
}

func (c *crcReader) full(b []byte) error {
	if _, err := io.ReadFull(c.r, b); err != nil {
		return fmt.Errorf("%w: truncated", ErrPartitionFile)
	}
	c.crc = crc32.Update(c.crc, crcTable, b)
	return nil
}

func (c *crcReader) u32() (uint32, error) {
	var b [4]byte
	err := c.full(b[:])
	return binary.LittleEndian.Uint32(b[:]), err
}

// decodePartFile reads a partition file of k, written with token, of
// dims-dimensional vectors, and returns its entries as newEntryNormalized and
// tokenize make them. Every length is checked before it is used, and nothing
// is returned unless the checksum matches the whole.
func decodePartFile(r io.Reader, k partKey, token uint64, dims int) ([]*entry, error) {
	magic := make([]byte, len(partFileMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != partFileMagic {
		return nil, fmt.Errorf("%w: not a partition file of this version", ErrPartitionFile)
	}
	cr := &crcReader{r: r}
	head := make([]byte, 8+8+4)
	if err := cr.full(head); err != nil {
		return nil, err
	}
	switch {
	case binary.LittleEndian.Uint64(head) != token:
		return nil, fmt.Errorf("%w: of another close", ErrPartitionFile)
	case binary.LittleEndian.Uint64(head[8:]) != partTokenizer:
		return nil, fmt.Errorf("%w: of another tokenizer", ErrPartitionFile)
	case int(binary.LittleEndian.Uint32(head[16:])) != dims:
		return nil, fmt.Errorf("%w: %d dimensions, the store has %d", ErrPartitionFile, binary.LittleEndian.Uint32(head[16:]), dims)
	}
	for _, want := range []string{k.tenant, k.userID} {
		if got, err := cr.u32(); err != nil || int(got) != len(want) {
			return nil, fmt.Errorf("%w: of another partition", ErrPartitionFile)
		}
		got := make([]byte, len(want))
		if err := cr.full(got); err != nil || string(got) != want {
			return nil, fmt.Errorf("%w: of another partition", ErrPartitionFile)
		}
	}
	count, err := cr.u32()
	if err != nil {
		return nil, err
	}
	var (
		ents []*entry
		buf  bytes.Buffer
	)
	for range count {
		size, err := cr.u32()
		if err != nil {
			return nil, err
		}
		if int(size) < partRecordFixed+4*dims || size > maxPartRecordBytes {
			return nil, fmt.Errorf("%w: record size %d", ErrPartitionFile, size)
		}
		// Grown as the bytes come, not to a damaged size at once.
		buf.Reset()
		if n, _ := io.CopyN(&buf, r, int64(size)); n != int64(size) {
			return nil, fmt.Errorf("%w: truncated", ErrPartitionFile)
		}
		cr.crc = crc32.Update(cr.crc, crcTable, buf.Bytes())
		e, err := decodePartRecord(buf.Bytes(), dims)
		if err != nil {
			return nil, err
		}
		ents = append(ents, e)
	}
	var sum [5]byte
	if n, _ := io.ReadFull(r, sum[:]); n != 4 {
		return nil, fmt.Errorf("%w: truncated or trailing bytes", ErrPartitionFile)
	}
	if binary.LittleEndian.Uint32(sum[:]) != cr.crc {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrPartitionFile)
	}
	return ents, nil
}

// decodePartRecord decodes one record of appendPartRecord (without its
// length), whose size is at least partRecordFixed + 4·dims.
func decodePartRecord(b []byte, dims int) (*entry, error) {
	u64 := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
	rid, ts, expires, hits, conf := int64(u64(0)), int64(u64(1)), int64(u64(2)), int64(u64(3)), math.Float64frombits(u64(4))
	hasExpiry := b[40]
	lens := b[41:partRecordFixed]
	total := 0
	for i := range partStrings {
		total += int(binary.LittleEndian.Uint32(lens[4*i:]))
	}
	if hasExpiry > 1 || total != len(b)-partRecordFixed-4*dims {
		return nil, fmt.Errorf("%w: record layout", ErrPartitionFile)
	}
	// One allocation holds all of the record's strings.
	all := string(b[partRecordFixed : partRecordFixed+total])
	var strs [partStrings]string
	at := 0
	for i := range strs {
		n := int(binary.LittleEndian.Uint32(lens[4*i:]))
		strs[i], at = all[at:at+n], at+n
	}
	rec := vectorstore.Record{
		ID: strs[0], MemoryType: vectorstore.MemoryType(strs[1]), Scope: strs[2], Kind: strs[3], Key: strs[4], Text: strs[5],
		ChatID: strs[6], Who: strs[7], HitCount: int(hits), Confidence: conf,
		Vector: decodeVector(b[partRecordFixed+total:]), TS: time.UnixMicro(ts).UTC(),
	}
	if hasExpiry == 1 {
		rec.ExpiresAt = time.UnixMicro(expires).UTC()
	}
	e := newEntryNormalized(rid, rec, strs[8])
	e.terms = strs[9]
	return e, nil
}

// savePartFiles writes the partition files of the loaded partitions of at
// least PartitionFileMin live records, and returns what the MANIFEST is to
// list, nil when none was written. Close calls it holding writeMu, after the
// last write and before the database closes.
func (s *backend) savePartFiles() *partFiles {
	if s.cfg.Path == MemoryPath {
		return nil
	}
	s.removePartFiles() // files of an earlier start, never trusted again
	if s.cfg.PartitionFileMin < 0 {
		return nil
	}
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil
	}
	pf := &partFiles{token: binary.LittleEndian.Uint64(tok[:]), keys: map[partKey]bool{}}
	s.cacheMu.RLock()
	defer s.cacheMu.RUnlock()
	for k, p := range s.parts {
		if p.live < max(1, s.cfg.PartitionFileMin) {
			continue
		}
		if err := s.savePartFile(p, pf.token); err != nil {
			s.logger.Warn("writing a partition file; the partition will load from the database", obs.Tenant(k.tenant), obs.User(k.userID), zap.Error(err))
			continue
		}
		pf.keys[k] = true
	}
	if len(pf.keys) == 0 {
		return nil
	}
	return pf
}

func (s *backend) savePartFile(p *partition, token uint64) error {
	path := partFile(s.cfg.Path, p.key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error { return p.encodePartFile(w, token, s.cfg.Dimensions) })
}

// writeManifest writes the MANIFEST of pf, once the database is closed: the
// files are trusted from now on, until the next New.
func (s *backend) writeManifest(pf *partFiles) {
	id, ok := currentIdentity(s.cfg.Path)
	if !ok {
		s.logger.Warn("partition files written but not trusted: the database file's identity is unknown")
		return
	}
	b := append([]byte(partManifestMagic), id.append(nil)...)
	b = binary.LittleEndian.AppendUint64(b, pf.token)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(pf.keys)))
	for k := range pf.keys {
		b = appendString(appendString(b, k.tenant), k.userID)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	if err := writeFileAtomic(partManifest(s.cfg.Path), b); err != nil {
		s.logger.Warn("writing the partition files' MANIFEST; the next start loads from the database", zap.Error(err))
	}
}

// removePartFiles removes the partition directory and what it holds.
func (s *backend) removePartFiles() {
	if err := os.RemoveAll(partDir(s.cfg.Path)); err != nil {
		s.logger.Warn("removing partition files", zap.Error(err))
	}
}

// preloadPartFiles loads the partitions of pf in the background, while the
// rest of the process starts, then removes the files. A write beginning
// meanwhile leaves the rest to load from the database on their first read
// (distrustPartFiles), as without files. Close stops it and waits for it.
func (s *backend) preloadPartFiles(pf *partFiles) {
	s.partFiles = pf
	ctx, cancel := context.WithCancel(context.Background())
	s.stopPreload, s.preloadDone = cancel, make(chan struct{})
	keys := slices.Collect(maps.Keys(pf.keys))
	go func() {
		defer close(s.preloadDone)
		for _, k := range keys {
			s.writeMu.Lock()
			trusted := s.partFiles != nil && s.partFiles.keys[k]
			s.writeMu.Unlock()
			if !trusted || ctx.Err() != nil {
				continue
			}
			p, err := s.loadPartition(ctx, k)
			if err != nil {
				s.logger.Warn("preloading a partition", obs.Tenant(k.tenant), obs.User(k.userID), zap.Error(err))
				continue
			}
			// No reader waits for it: unpinned, it may be evicted as any other.
			p.pins.Add(-1)
			s.evict()
		}
		s.writeMu.Lock()
		s.partFiles = nil
		s.removePartFiles()
		s.writeMu.Unlock()
	}()
}

// writeAtomic is writeFileAtomic of what write writes.
func writeAtomic(path string, write func(w io.Writer) error) error {
	tmp, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// syncDir makes the renames and removals in dir survive a crash.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
