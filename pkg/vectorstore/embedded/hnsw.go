package embedded

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// hnsw is a hierarchical navigable small world graph (Malkov and Yashunin, 2018)
// over unit vectors, with distance 1 − dot. It is the algorithm of the paper and
// hnswlib: a beam search per layer that stops when the nearest unexpanded
// candidate is farther than the worst of the beam, and neighbours chosen by the
// paper's heuristic (a candidate is linked only if it is nearer to the node than
// to every neighbour already chosen), also when a full neighbour list is shrunk.
//
// Why not github.com/coder/hnsw (v0.6.1), measured first: its layer search ends
// as soon as one expansion fails to improve the best distance and keeps only k
// results (EfSearch bounds just the candidate queue), it links the M nearest
// without the heuristic, and keeps neighbours in maps sorted on every expansion.
// Its recall@10 against exact search stayed at 0.04–0.10 on the local embedder's
// vectors whatever M and EfSearch were set to.
//
// Nodes are numbered in insertion order and never removed: a deleted record stays
// a node (its doc is dead in the partition, so searches pass through it but never
// return it) until the partition is compacted and its graphs rebuilt. Not safe for
// concurrent use: annIndex guards it.
type hnsw struct {
	vecs   [][]float32 // node → vector (the entry's normalised Vector, shared)
	docs   []int32     // node → its doc in the partition
	levels []uint8
	// links0[n*hnswCap0 : n*hnswCap0+n0[n]] are node n's layer-0 neighbours,
	// flat: layer 0 holds every node, and one array of them keeps the GC's work
	// and the memory per node small.
	links0 []int32
	n0     []uint8
	upper  map[int32][][]int32 // node → its neighbours on layers 1..levels[node]
	entry  int32
	top    int // entry's level; −1 while empty
	// src is rng's state, which a graph file keeps (graphfile.go), so a graph
	// loaded from one draws the levels the graph it saved would have drawn.
	src *rand.PCG
	rng *rand.Rand
}

const (
	// hnswM is the neighbours a node keeps on upper layers, hnswM0 on layer 0
	// (2·M, as the paper advises).
	hnswM  = 16
	hnswM0 = 2 * hnswM
	// hnswCap0 is the room of a layer-0 list: a list takes new links past hnswM0
	// until it is full and is then shrunk to hnswM0 by the heuristic, which
	// compares every pair of its candidates. Shrinking on every link past hnswM0
	// (as hnswlib does) was two thirds of an insertion's time.
	hnswCap0 = hnswM0 + hnswM
	// hnswEfConstruction is the beam an insertion searches its neighbours with.
	hnswEfConstruction = 64
	hnswMaxLevel       = 16
)

// hnswML is the level multiplier, 1/ln M: each layer holds about 1/M of the one
// below.
var hnswML = 1 / math.Log(hnswM)

func newHNSW() *hnsw {
	// A fixed seed: the same records inserted in the same order give the same
	// graph, so a search is reproducible.
	src := rand.NewPCG(1, 2)
	return &hnsw{upper: make(map[int32][][]int32), top: -1, src: src, rng: rand.New(src)}
}

func (g *hnsw) len() int { return len(g.vecs) }

// cand is a node and its distance to the query.
type cand struct {
	dist float32
	node int32
}

func (g *hnsw) dist(q []float32, n int32) float32 { return 1 - dot(q, g.vecs[n]) }

func (g *hnsw) neighbours(n int32, level int) []int32 {
	if level == 0 {
		return g.links0[int(n)*hnswCap0 : int(n)*hnswCap0+int(g.n0[n])]
	}
	return g.upper[n][level-1]
}

func (g *hnsw) setNeighbours(n int32, level int, ns []int32) {
	if level == 0 {
		copy(g.links0[int(n)*hnswCap0:], ns)
		g.n0[n] = uint8(len(ns))
		return
	}
	g.upper[n][level-1] = append(g.upper[n][level-1][:0], ns...)
}

// insert adds vec (unit length, or zero) as the node of doc.
func (g *hnsw) insert(vec []float32, doc int32, vs *visitSet) {
	n := int32(len(g.vecs))
	level := min(int(-math.Log(1-g.rng.Float64())*hnswML), hnswMaxLevel)
	g.vecs = append(g.vecs, vec)
	g.docs = append(g.docs, doc)
	g.levels = append(g.levels, uint8(level))
	g.links0 = append(g.links0, make([]int32, hnswCap0)...)
	g.n0 = append(g.n0, 0)
	if level > 0 {
		ls := make([][]int32, level)
		for i := range ls {
			ls[i] = make([]int32, 0, hnswM)
		}
		g.upper[n] = ls
	}
	if g.top < 0 {
		g.entry, g.top = n, level
		return
	}
	eps := []cand{{g.dist(vec, g.entry), g.entry}}
	for l := g.top; l > level; l-- {
		eps = g.searchLayer(vec, eps, 1, l, nil, vs)
	}
	for l := min(g.top, level); l >= 0; l-- {
		found := g.searchLayer(vec, eps, hnswEfConstruction, l, nil, vs)
		chosen := g.selectNeighbours(found, hnswM)
		ids := make([]int32, len(chosen))
		for i, c := range chosen {
			ids[i] = c.node
		}
		g.setNeighbours(n, l, ids)
		for _, c := range chosen {
			g.link(c.node, n, c.dist, l)
		}
		eps = found
	}
	if level > g.top {
		g.entry, g.top = n, level
	}
}

// link adds to to from's neighbours on level, d being their distance; a full
// list is shrunk by the heuristic.
func (g *hnsw) link(from, to int32, d float32, level int) {
	mmax, room := hnswM, hnswM
	if level == 0 {
		mmax, room = hnswM0, hnswCap0
	}
	ns := g.neighbours(from, level)
	if len(ns) < room {
		if level == 0 {
			g.links0[int(from)*hnswCap0+len(ns)] = to
			g.n0[from]++
		} else {
			g.upper[from][level-1] = append(g.upper[from][level-1], to)
		}
		return
	}
	cs := make([]cand, 0, len(ns)+1)
	cs = append(cs, cand{d, to})
	fv := g.vecs[from]
	for _, o := range ns {
		cs = append(cs, cand{g.dist(fv, o), o})
	}
	slices.SortFunc(cs, cmpCand)
	chosen := g.selectNeighbours(cs, mmax)
	ids := make([]int32, len(chosen))
	for i, c := range chosen {
		ids[i] = c.node
	}
	g.setNeighbours(from, level, ids)
}

func cmpCand(a, b cand) int {
	switch {
	case a.dist < b.dist:
		return -1
	case a.dist > b.dist:
		return 1
	}
	return int(a.node) - int(b.node)
}

// selectNeighbours is the paper's heuristic (algorithm 4) over cs, sorted
// nearest first: a candidate is kept only if it is nearer to the base than to
// every one kept, so the links point in different directions rather than all
// into the nearest cluster. The list may end shorter than m.
func (g *hnsw) selectNeighbours(cs []cand, m int) []cand {
	if len(cs) <= m {
		return cs
	}
	out := make([]cand, 0, m)
	for _, c := range cs {
		if len(out) == m {
			break
		}
		good := true
		cv := g.vecs[c.node]
		for _, o := range out {
			if g.dist(cv, o.node) < c.dist {
				good = false
				break
			}
		}
		if good {
			out = append(out, c)
		}
	}
	return out
}

// searchLayer is the beam search of one layer from eps: the ef nearest nodes
// that accept takes (nil: all), nearest first. Nodes accept refuses are still
// expanded, so a filter cuts no path through the graph.
func (g *hnsw) searchLayer(q []float32, eps []cand, ef, level int, accept func(node int32) bool, vs *visitSet) []cand {
	vs.reset(len(g.vecs))
	var near, beam candHeap // near: a min-heap of unexpanded nodes; beam: a max-heap of the results
	near.max, beam.max = false, true
	for _, e := range eps {
		vs.visit(e.node)
		near.push(e)
		if accept == nil || accept(e.node) {
			beam.push(e)
		}
	}
	for beam.len() > ef {
		beam.pop()
	}
	for near.len() > 0 {
		c := near.pop()
		if beam.len() >= ef && c.dist > beam.peek().dist {
			break
		}
		for _, nb := range g.neighbours(c.node, level) {
			if !vs.visit(nb) {
				continue
			}
			d := g.dist(q, nb)
			if beam.len() < ef || d < beam.peek().dist {
				near.push(cand{d, nb})
				if accept == nil || accept(nb) {
					beam.push(cand{d, nb})
					if beam.len() > ef {
						beam.pop()
					}
				}
			}
		}
	}
	out := beam.items
	slices.SortFunc(out, cmpCand)
	return out
}

// search returns the nearest ef nodes that accept takes, nearest first.
func (g *hnsw) search(q []float32, ef int, accept func(node int32) bool) []cand {
	if g.top < 0 || ef <= 0 {
		return nil
	}
	vs := visitPool.Get().(*visitSet)
	defer visitPool.Put(vs)
	eps := []cand{{g.dist(q, g.entry), g.entry}}
	for l := g.top; l > 0; l-- {
		eps = g.searchLayer(q, eps, 1, l, nil, vs)
	}
	return g.searchLayer(q, eps, ef, 0, accept, vs)
}

// candHeap is a binary heap of candidates, the farthest on top when max.
type candHeap struct {
	items []cand
	max   bool
}

func (h *candHeap) len() int   { return len(h.items) }
func (h *candHeap) peek() cand { return h.items[0] }
func (h *candHeap) less(i, j int) bool {
	if h.max {
		return h.items[i].dist > h.items[j].dist
	}
	return h.items[i].dist < h.items[j].dist
}

func (h *candHeap) push(c cand) {
	h.items = append(h.items, c)
	for i := len(h.items) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	for i := 0; ; {
		l, r, s := 2*i+1, 2*i+2, i
		if l < n && h.less(l, s) {
			s = l
		}
		if r < n && h.less(r, s) {
			s = r
		}
		if s == i {
			break
		}
		h.items[s], h.items[i] = h.items[i], h.items[s]
		i = s
	}
	return top
}

// visitSet marks the nodes a search has seen: a mark is the search's epoch, so
// starting a search costs no clearing.
type visitSet struct {
	marks []uint32
	epoch uint32
}

var visitPool = sync.Pool{New: func() any { return new(visitSet) }}

func (v *visitSet) reset(n int) {
	if len(v.marks) < n {
		v.marks = append(v.marks, make([]uint32, n-len(v.marks))...)
	}
	v.epoch++
	if v.epoch == 0 {
		clear(v.marks)
		v.epoch = 1
	}
}

// visit marks n and reports whether it was unmarked.
func (v *visitSet) visit(n int32) bool {
	if v.marks[n] == v.epoch {
		return false
	}
	v.marks[n] = v.epoch
	return true
}
