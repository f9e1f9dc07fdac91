package embedded

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/obs"
)

// Graph files: a partition's HNSW graphs saved beside the database, so that a
// restarted store searches them at once instead of building them again (about
// 100 s of a core per 100,000 records).
//
// A file is a snapshot of one partition: its docs in order, each as its rid and
// a fingerprint of its memory type and vector (dead docs as rid −1), then each
// graph's nodes and links, with node → doc numbers of that order. It never needs
// to match the database exactly: when the partition is loaded, each doc of the
// file whose rid still holds a record of the same type and vector takes its
// number again, the others stay dead, and the records the file does not know are
// appended after them, as the writes since the snapshot would have appended them
// to the running partition. The graphs then hold exactly the docs they held when
// saved, and the indexer inserts the new ones as it does after any write. A
// record changed or deleted since stays a dead node, as in a running store; its
// vector is not in the file (nor in the database any more), so the node keeps
// its links with a zero vector, which no search returns and which every search
// with a beam as wide as the graph still expands (TestPropertyGraphFilesSurviveRestarts).
//
// The file holds no text and no vector, only rids, 64-bit fingerprints and
// links; an erasure (DeleteByFilter) deletes it all the same, and a partition
// whose records are all gone writes none.
//
// When: a partition's graphs are saved when the store closes, and by the indexer
// when they have grown by Config.GraphSaveNodes nodes, or by as many as they
// held at the last save if that is more (so a graph of n nodes has been written
// about 2n node-records in all), so that a crash loses at most that much of the
// building. Writing is atomic: a temporary file, synced, renamed over the old.

// graphFileMagic starts every graph file; its last byte is the format version.
const graphFileMagic = "AMHNSW\x00\x01"

// DefaultGraphSaveNodes is Config.GraphSaveNodes' default: about ten seconds of
// a core's building (BENCHMARKS.md), and a few MB of file per save.
const DefaultGraphSaveNodes = 10000

// ErrGraphFile is a graph file that cannot be used: corrupt, truncated, or of
// another partition, version or dimension. The store logs it and builds the
// graphs again.
var ErrGraphFile = errors.New("unusable graph file")

// graphDir is where the graph files of the store at path live.
func graphDir(path string) string { return path + ".graphs" }

// graphFile is k's graph file.
func graphFile(path string, k partKey) string {
	return filepath.Join(graphDir(path), partFileName(k)+".hnsw")
}

// partFileName is the name of k's files without their extension: a hash, which
// neither holds nor is limited by the tenant's and user's ids.
func partFileName(k partKey) string {
	h := sha256.Sum256([]byte(k.tenant + "\x00" + k.userID))
	return hex.EncodeToString(h[:16])
}

// fingerprint identifies a record's graph-relevant content: its memory type
// slot and the bits of its normalised vector.
func fingerprint(slot uint8, vec []float32) uint64 {
	h := uint64(slot) ^ 0x9e3779b97f4a7c15
	for _, f := range vec {
		h = (h ^ uint64(math.Float32bits(f))) * 0x100000001b3
		h ^= h >> 29
	}
	return h
}

// encodeGraphs returns p's graph file, nil when it has no graph node or no live
// record. The caller holds cacheMu (shared suffices): the docs do not change
// meanwhile; each graph is read under its own lock.
func (p *partition) encodeGraphs(dims int) []byte {
	if p.live == 0 {
		return nil
	}
	var gs [indexKinds]*annIndex
	nodes := 0
	for t := range indexKinds {
		if a := p.ann[t].Load(); a != nil {
			a.mu.RLock()
			defer a.mu.RUnlock()
			if a.g.len() > 0 {
				gs[t], nodes = a, nodes+a.g.len()
			}
		}
	}
	if nodes == 0 {
		return nil
	}
	b := make([]byte, 0, 64+len(p.key.tenant)+len(p.key.userID)+16*len(p.docs)+nodes*(8+4*hnswM0))
	b = append(b, graphFileMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(dims))
	b = appendString(b, p.key.tenant)
	b = appendString(b, p.key.userID)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.docs)))
	for d, e := range p.docs {
		if e == nil {
			b = binary.LittleEndian.AppendUint64(b, math.MaxUint64) // rid −1
			b = binary.LittleEndian.AppendUint64(b, 0)
			continue
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(e.rid))
		b = binary.LittleEndian.AppendUint64(b, fingerprint(p.kinds[d], e.rec.Vector))
	}
	for _, a := range gs {
		if a == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = a.appendTo(b)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendTo appends the graph (not its vectors) and upto. The caller holds a.mu.
func (a *annIndex) appendTo(b []byte) []byte {
	g := a.g
	rng, _ := g.src.MarshalBinary() // never fails
	b = binary.LittleEndian.AppendUint32(b, uint32(a.upto))
	b = binary.LittleEndian.AppendUint32(b, uint32(g.len()))
	b = binary.LittleEndian.AppendUint32(b, uint32(g.entry))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(g.top)))
	b = append(b, byte(len(rng)))
	b = append(b, rng...)
	for n := range g.len() {
		b = binary.LittleEndian.AppendUint32(b, uint32(g.docs[n]))
		b = append(b, g.levels[n])
		for l := range int(g.levels[n]) + 1 {
			ns := g.neighbours(int32(n), l)
			b = append(b, byte(len(ns)))
			for _, nb := range ns {
				b = binary.LittleEndian.AppendUint32(b, uint32(nb))
			}
		}
	}
	return b
}

// graphSnapshot is a decoded graph file.
type graphSnapshot struct {
	rids []int64  // doc → rid, −1 dead
	fps  []uint64 // doc → fingerprint
	// graphs[t] is slot t's graph, vectors not set, or nil.
	graphs [indexKinds]*annIndex
}

// decodeGraphs parses a graph file of k with dims-dimensional vectors, checking
// every number it holds, so that a file that passes cannot make a search index
// out of range.
func decodeGraphs(data []byte, k partKey, dims int) (*graphSnapshot, error) {
	if len(data) < len(graphFileMagic)+4 || string(data[:len(graphFileMagic)]) != graphFileMagic {
		return nil, fmt.Errorf("%w: not a graph file of this version", ErrGraphFile)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrGraphFile)
	}
	r := &reader{b: body[len(graphFileMagic):]}
	if got := int(r.u32()); got != dims {
		return nil, fmt.Errorf("%w: %d dimensions, the store has %d", ErrGraphFile, got, dims)
	}
	if tenant, user := r.str(), r.str(); r.err == nil && (tenant != k.tenant || user != k.userID) {
		return nil, fmt.Errorf("%w: of another partition", ErrGraphFile)
	}
	ndocs := int(r.u32())
	if r.err != nil || ndocs > len(r.b)/16 {
		return nil, fmt.Errorf("%w: truncated doc list", ErrGraphFile)
	}
	s := &graphSnapshot{rids: make([]int64, ndocs), fps: make([]uint64, ndocs)}
	for d := range ndocs {
		s.rids[d], s.fps[d] = int64(r.u64()), r.u64()
	}
	for t := range indexKinds {
		if r.byte() == 1 {
			s.graphs[t] = r.graph(ndocs)
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}

// reader decodes a graph file's body; the first error sticks and later reads
// return zeros.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrGraphFile, what)
	}
	r.b = nil
}

func (r *reader) take(n int) []byte {
	if n < 0 || len(r.b) < n {
		r.fail("truncated")
		return make([]byte, 8) // zeros for the fixed-size reads; never n, which may be huge

	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) byte() byte  { return r.take(1)[0] }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) str() string { return string(r.take(int(r.u32()))) }
func (r *reader) i32() int32  { return int32(r.u32()) }
func (r *reader) bad(c bool, what string) bool {
	if c {
		r.fail(what)
	}
	return r.err != nil
}

// graph decodes a graph whose docs are below ndocs.
func (r *reader) graph(ndocs int) *annIndex {
	upto, n, entry, top := r.i32(), int(r.u32()), r.i32(), int(r.i32())
	if r.bad(upto < 0 || int(upto) > ndocs || n > ndocs || n > len(r.b)/6, "graph size") ||
		r.bad(n == 0 || top < 0 || top > hnswMaxLevel || entry < 0 || int(entry) >= n, "graph entry") {
		return nil
	}
	g := newHNSW()
	if r.bad(g.src.UnmarshalBinary(r.take(int(r.byte()))) != nil, "random state") {
		return nil
	}
	g.entry, g.top = entry, top
	g.docs, g.levels = make([]int32, n), make([]uint8, n)
	g.links0, g.n0 = make([]int32, n*hnswCap0), make([]uint8, n)
	for node := range n {
		g.docs[node], g.levels[node] = r.i32(), r.byte()
		level := int(g.levels[node])
		if r.bad(g.docs[node] < 0 || g.docs[node] >= upto || level > top, "node") {
			return nil
		}
		if level > 0 {
			g.upper[int32(node)] = make([][]int32, level)
		}
		for l := range level + 1 {
			cnt := int(r.byte())
			if r.bad(l == 0 && cnt > hnswCap0 || l > 0 && cnt > hnswM, "neighbour count") {
				return nil
			}
			// Layer 0's links are read into their place in links0, not
			// into a slice per node that is then copied there.
			var ns []int32
			if l == 0 {
				ns, g.n0[node] = g.links0[node*hnswCap0:node*hnswCap0+cnt], uint8(cnt)
			} else {
				ns = make([]int32, cnt, hnswM)
				g.upper[int32(node)][l-1] = ns
			}
			for i := range ns {
				ns[i] = r.i32()
				if r.bad(ns[i] < 0 || int(ns[i]) >= n, "neighbour") {
					return nil
				}
			}
		}
	}
	if r.bad(int(g.levels[entry]) != top, "entry level") {
		return nil
	}
	// A search on layer l reads the layer-l links of the nodes it reaches.
	for _, ls := range g.upper {
		for i, ns := range ls {
			for _, nb := range ns {
				if r.bad(int(g.levels[nb]) < i+1, "link to a lower node") {
					return nil
				}
			}
		}
	}
	return &annIndex{g: g, upto: upto}
}

// loadGraphs reads k's graph file; nil when there is none, it is unusable
// (logged: the graphs are then built again, as without a file), or the store
// is configured without graphs.
func (s *backend) loadGraphs(k partKey) *graphSnapshot {
	if s.cfg.Path == MemoryPath || s.cfg.ANNThreshold < 0 {
		return nil // no file, or graphs not wanted any more
	}
	data, err := os.ReadFile(graphFile(s.cfg.Path, k))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var snap *graphSnapshot
	if err == nil {
		snap, err = decodeGraphs(data, k, s.cfg.Dimensions)
	}
	if err != nil {
		s.logger.Warn("graph file not used; the graphs will be built again", obs.Tenant(k.tenant), obs.User(k.userID), zap.Error(err))
		return nil
	}
	return snap
}

// restore fills the empty partition p with recs (entries of the database's
// rows, in any order) in the file's doc order, and gives it the file's graphs:
// see the comment at the top of this file.
func (p *partition) restore(snap *graphSnapshot, recs []*entry, dims int) {
	pos := make(map[int64]int, len(snap.rids))
	for d, rid := range snap.rids {
		if rid >= 0 {
			pos[rid] = d
		}
	}
	slots := make([]*entry, len(snap.rids))
	var extra []*entry
	for _, e := range recs {
		d, ok := pos[e.rid]
		if ok && snap.fps[d] == fingerprint(uint8(typeSlot(e.rec.MemoryType)), e.rec.Vector) {
			slots[d] = e
		} else {
			extra = append(extra, e)
		}
	}
	for _, e := range slots {
		if e == nil {
			p.docs, p.kinds, p.rids = append(p.docs, nil), append(p.kinds, deadKind), append(p.rids, -1)
		} else {
			p.put(e)
		}
	}
	for _, e := range extra {
		p.put(e)
	}
	zero := make([]float32, dims)
	for t, a := range snap.graphs {
		if a == nil {
			continue
		}
		a.g.vecs = make([][]float32, len(a.g.docs))
		for n, d := range a.g.docs {
			if e := p.docs[d]; e != nil && int(p.kinds[d]) == t {
				a.g.vecs[n] = e.rec.Vector
			} else {
				a.g.vecs[n] = zero
			}
		}
		p.ann[t].Store(a)
		p.savedNodes.Add(int64(a.g.len()))
	}
	// The records dead since the file was written may be most of them.
	p.maybeCompact()
}

// saveGraphs writes p's graph file atomically (or removes it when p has no
// graph node or live record). graphMu serialises it with erasures
// (DeleteByFilter), so that a save that read the partition before an erasure
// cannot put its file back after it. An evicted partition is not saved: no
// write reaches it any more, so it may hold records erased since (eviction
// saves a partition before it drops it).
func (s *backend) saveGraphs(p *partition) error {
	if s.cfg.Path == MemoryPath {
		return nil
	}
	s.graphMu.Lock()
	defer s.graphMu.Unlock()
	s.cacheMu.RLock()
	if p.evicted {
		s.cacheMu.RUnlock()
		return nil
	}
	data := p.encodeGraphs(s.cfg.Dimensions)
	p.unsaved.Store(0)
	p.savedNodes.Store(int64(p.graphNodes()))
	s.cacheMu.RUnlock()
	path := graphFile(s.cfg.Path, p.key)
	if data == nil {
		return removeGraphFile(path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("graph file: %w", err)
	}
	if err := writeFileAtomic(path, data); err != nil {
		p.unsaved.Add(1) // to be tried again
		return fmt.Errorf("graph file: %w", err)
	}
	return nil
}

// graphNodes is the nodes of p's graphs. The caller holds cacheMu.
func (p *partition) graphNodes() int {
	n := 0
	for t := range indexKinds {
		if a := p.ann[t].Load(); a != nil {
			a.mu.RLock()
			n += a.g.len()
			a.mu.RUnlock()
		}
	}
	return n
}

// dueForSave reports whether p's graphs have grown enough since the last save
// to be saved again (see the top of this file).
func (p *partition) dueForSave(every int) bool {
	return every > 0 && p.unsaved.Load() >= max(int64(every), p.savedNodes.Load())
}

// removeGraphFile removes a graph file and the temporary file a crash may have
// left of it.
func removeGraphFile(path string) error {
	for _, f := range []string{path, path + ".tmp"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("graph file: %w", err)
		}
	}
	return nil
}

// writeFileAtomic replaces path with data: a crash leaves the old file or the
// new one, never a part of either. The temporary file has a fixed name, so an
// erasure knows what to remove (removeGraphFile); graphMu keeps two writes of
// it apart.
func writeFileAtomic(path string, data []byte) error {
	err := writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err == nil {
		syncDir(filepath.Dir(path)) // the rename itself survives a crash
	}
	return err
}

// saveGraphsLogged is saveGraphs for the indexer, which has no caller to
// return an error to: a graph file not written only costs a rebuild after a
// restart.
func (s *backend) saveGraphsLogged(p *partition) {
	if err := s.saveGraphs(p); err != nil {
		s.logger.Warn("saving a partition's graphs", obs.Tenant(p.key.tenant), obs.User(p.key.userID), zap.Error(err))
	}
}

// saveAllGraphs saves the graphs of every loaded partition changed since its
// last save; Close calls it once the indexer has stopped.
func (s *backend) saveAllGraphs() {
	s.cacheMu.RLock()
	var due []*partition
	for _, p := range s.parts {
		if p.unsaved.Load() > 0 {
			due = append(due, p)
		}
	}
	s.cacheMu.RUnlock()
	for _, p := range due {
		s.saveGraphsLogged(p)
	}
}

// eraseGraphs removes k's graph file (DeleteByFilter) and has a loaded
// partition's graphs saved again at Close.
func (s *backend) eraseGraphs(k partKey) error {
	if s.cfg.Path == MemoryPath {
		return nil
	}
	s.graphMu.Lock()
	defer s.graphMu.Unlock()
	s.cacheMu.RLock()
	if p := s.parts[k]; p != nil {
		p.unsaved.Add(1)
	}
	s.cacheMu.RUnlock()
	return removeGraphFile(graphFile(s.cfg.Path, k))
}
