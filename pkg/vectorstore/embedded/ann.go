package embedded

import (
	"sync"
)

// annIndex is a partition's HNSW graph of the records of one memory type, from
// the first dense search that finds Config.ANNThreshold records of the type (on
// demand: with the offline embedder dense search is rare, and a graph of 100,000
// records is about a minute of a core). It is built and extended by the store's
// indexer in the background, never by a write or a search: docs
// [0, upto) of its type are in the graph, and a search scans the docs from upto
// on exactly, so a record is found from the moment it is written, and a
// partition loaded at start-up is searchable at once (exactly, then less and
// less so as the graph catches up).
//
// A record deleted or replaced stays a node of the graph (its doc is dead), so
// the graph keeps its paths; compaction renumbers the docs and drops the graphs,
// which the indexer then builds again.
type annIndex struct {
	mu   sync.RWMutex // searches hold it shared, the indexer exclusively per insertion batch
	g    *hnsw
	upto int32
}

// annNodesPerBeam: a graph's search beam grows by one per this many nodes
// (Config.ANNBeam). A fixed beam loses recall as the graph grows: on the local
// embedder's vectors of prose, beam 192 gave recall@10 0.988 at 20,000 records
// and 0.976 at 100,000, where 384 gave 0.987.
const annNodesPerBeam = 256

// annBatch is how many records the indexer inserts per hold of the locks: about
// a millisecond, the longest a search or a write waits for it.
const annBatch = 4

// indexKinds is the number of memory type slots whose records have a graph:
// every known memory type, len(memoryTypes) (TestIndexKinds); records of an
// unknown type (slot indexKinds) are rare and always scanned.
const indexKinds = 3

// maybeIndex gives slot t a graph if it holds annMin records and has none, and
// reports whether it did. The caller holds cacheMu.
func (p *partition) maybeIndex(t int) bool {
	return p.annMin > 0 && p.kindLive[t] >= p.annMin && p.ann[t].Load() == nil &&
		p.ann[t].CompareAndSwap(nil, &annIndex{g: newHNSW()})
}

// indexBehind reports whether a graph lacks docs. The caller holds cacheMu.
func (p *partition) indexBehind() bool {
	for t := range indexKinds {
		if a := p.ann[t].Load(); a != nil {
			a.mu.RLock()
			behind := int(a.upto) < len(p.docs)
			a.mu.RUnlock()
			if behind {
				return true
			}
		}
	}
	return false
}

// indexSome inserts up to annBatch docs into each graph that lacks some, and
// reports whether any still does. The caller holds cacheMu shared, so the docs
// do not change meanwhile.
func (p *partition) indexSome(vs *visitSet) bool {
	more := false
	for t := range indexKinds {
		a := p.ann[t].Load()
		if a == nil {
			continue
		}
		a.mu.Lock()
		added := 0
		from := a.upto
		d := int(a.upto)
		for ; d < len(p.docs) && added < annBatch; d++ {
			if int(p.kinds[d]) == t {
				a.g.insert(p.docs[d].rec.Vector, int32(d), vs)
				added++
			}
		}
		a.upto = int32(d)
		more = more || d < len(p.docs)
		a.mu.Unlock()
		if int(from) < d {
			// Docs of other types passed count too: the file keeps upto.
			p.unsaved.Add(int64(max(added, 1)))
		}
	}
	return more
}

// indexer builds and extends the partitions' graphs on one goroutine, so that
// neither writes nor searches pay for an insertion.
type indexer struct {
	cacheMu *sync.RWMutex
	// save writes a partition's graph file, once saveEvery nodes are due
	// (partition.dueForSave; 0: never).
	save      func(p *partition)
	saveEvery int
	mu        sync.Mutex
	pending   map[*partition]struct{}
	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
}

func newIndexer(cacheMu *sync.RWMutex, save func(p *partition), saveEvery int) *indexer {
	x := &indexer{cacheMu: cacheMu, save: save, saveEvery: saveEvery, pending: make(map[*partition]struct{}), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go x.run()
	return x
}

// notify queues p if one of its graphs lacks docs and it was not evicted. The
// caller holds cacheMu.
func (x *indexer) notify(p *partition) {
	if p.evicted || !p.indexBehind() {
		return
	}
	x.mu.Lock()
	x.pending[p] = struct{}{}
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

func (x *indexer) run() {
	defer close(x.done)
	vs := new(visitSet)
	for {
		select {
		case <-x.stop:
			return
		case <-x.wake:
		}
		for {
			p := x.next()
			if p == nil {
				break
			}
			if !x.catchUp(p, vs) {
				return
			}
		}
	}
}

// forget unqueues p, which eviction dropped. The caller holds cacheMu
// exclusively.
func (x *indexer) forget(p *partition) {
	x.mu.Lock()
	delete(x.pending, p)
	x.mu.Unlock()
}

// next takes a queued partition; nil when none is.
func (x *indexer) next() *partition {
	x.mu.Lock()
	defer x.mu.Unlock()
	for p := range x.pending {
		delete(x.pending, p)
		return p
	}
	return nil
}

// catchUp indexes p until its graphs hold every doc or it is evicted; false
// when the indexer was stopped. The shared lock is taken per batch, so a
// waiting write gets in between batches.
func (x *indexer) catchUp(p *partition, vs *visitSet) bool {
	for {
		select {
		case <-x.stop:
			return false
		default:
		}
		x.cacheMu.RLock()
		more := !p.evicted && p.indexSome(vs)
		x.cacheMu.RUnlock()
		if p.dueForSave(x.saveEvery) {
			x.save(p)
		}
		if !more {
			return true
		}
	}
}

// close stops the indexer and waits for it.
func (x *indexer) close() {
	close(x.stop)
	<-x.done
}

// denseRanking scores the records m selects by cosine similarity: exactly, or,
// for a memory type with a graph, by the graph's search with a beam of
// searchInto's beam over the docs it holds and exactly over the newer ones.
// started reports that it gave a type a graph, which the indexer is to build.
func denseRanking(p *partition, qv []float32, m *matcher, depth, beam int) (rs []ranked, started bool) {
	top := newTopK(depth)
	if m.ids != nil {
		for _, d := range p.candidates(m) {
			top.offer(ranked{p.docs[d].rid, d, float64(dot(qv, p.docs[d].rec.Vector))})
		}
		return top.sorted(), false
	}
	// from[t] is the first doc of slot t the exact scan must score.
	var from [indexKinds + 1]int32
	for t := range indexKinds {
		if !m.kinds[t] {
			continue
		}
		started = p.maybeIndex(t) || started
		if a := p.ann[t].Load(); a != nil {
			from[t] = a.searchInto(p, qv, m, depth, beam, top)
		}
	}
	start := int32(len(p.docs))
	for t, ok := range m.kinds {
		if ok {
			start = min(start, from[t])
		}
	}
	for d := start; int(d) < len(p.docs); d++ {
		k := p.kinds[d]
		if k == deadKind || !m.kinds[k] || d < from[k] {
			continue
		}
		if e := p.docs[d]; m.typeOnly || m.match(e) {
			top.offer(ranked{e.rid, d, float64(dot(qv, e.rec.Vector))})
		}
	}
	return top.sorted(), started
}

// searchInto offers top the graph's nearest live docs that m selects (a beam of
// max(beam, depth, nodes/annNodesPerBeam)) and returns the first doc the graph
// does not hold.
func (a *annIndex) searchInto(p *partition, qv []float32, m *matcher, depth, beam int, top *topK) int32 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	accept := func(n int32) bool {
		d := a.g.docs[n]
		return p.kinds[d] != deadKind && (m.typeOnly || m.match(p.docs[d]))
	}
	// All the beam is offered, not only its best depth: the graph orders equal
	// distances by node, top by rid, and a cut at depth would drop the wrong one of
	// a tie.
	for _, c := range a.g.search(qv, max(beam, depth, a.g.len()/annNodesPerBeam), accept) {
		if top.full() && float64(1-c.dist) < top.worst()-1e-5 {
			continue // cannot make it, whatever the last bits of its score
		}
		d := a.g.docs[c.node]
		// Scored again as the exact scan scores it (dot, not 1 − dist), so a
		// record scores the same bits either way.
		top.offer(ranked{p.docs[d].rid, d, float64(dot(qv, p.docs[d].rec.Vector))})
	}
	return a.upto
}
