package embedded

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const annBenchQueries = 200

// BenchmarkANNRecall measures the graph's dense search against the exact scan
// over one partition of 20,000 records of one memory type ($AGENTMEM_ANN_RECORDS
// to change it): recall@10
// (the share of the graph's top 10 scoring at least the exact 10th score, so
// ties count as found; idrecall@10 counts the exact ids instead; recall@10-2xbeam
// is recall@10 at twice the default beam), the time of a
// search each way, and the time to index the partition. Three sets of vectors:
// the local embedder's over real prose (comments of the Go standard library,
// distinct paragraphs), random vectors around 200 random centres (as a
// semantic embedding model's cluster), and uniformly random vectors, on which
// no neighbour is much nearer than any other and a graph's recall is low at any
// affordable beam.
func BenchmarkANNRecall(b *testing.B) {
	records := benchEnvInt(b, "AGENTMEM_ANN_RECORDS", 20_000)
	sets := []struct {
		name string
		gen  func(n int) [][]float32
	}{
		{"local-embedder", func(n int) [][]float32 { return embedProse(b, n) }},
		{"clustered", func(n int) [][]float32 { return randomVectors(n, 200) }},
		{"uniform", func(n int) [][]float32 { return randomVectors(n, 0) }},
	}
	for _, set := range sets {
		b.Run(set.name, func(b *testing.B) {
			vecs := set.gen(records + annBenchQueries)
			data, queries := vecs[:records], vecs[records:]
			p := newPartition(partKey{"acme", "u1"}, 1)
			for i, v := range data {
				p.put(newEntryNormalized(int64(i+1), vectorstore.Record{ID: fmt.Sprint(i), MemoryType: vectorstore.Episodic, Vector: v}, ""))
			}
			m := newMatcher(vectorstore.Filter{MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}, IncludeExpired: true}, time.Time{})
			denseRanking(p, queries[0], m, 10, DefaultANNBeam) // starts the graph
			start := time.Now()
			vs := new(visitSet)
			for p.indexSome(vs) {
			}
			build := time.Since(start)
			var recall, idRecall, wider float64
			var exactTime time.Duration
			for _, q := range queries {
				got, _ := denseRanking(p, q, m, 10, DefaultANNBeam)
				more, _ := denseRanking(p, q, m, 10, 2*DefaultANNBeam)
				st := time.Now()
				exact := newTopK(10)
				for i, v := range data {
					exact.offer(ranked{int64(i + 1), int32(i), float64(dot(q, v))})
				}
				want := exact.sorted()
				exactTime += time.Since(st)
				ids := map[int64]bool{}
				for _, w := range want {
					ids[w.rid] = true
				}
				for _, g := range got {
					if g.score >= want[len(want)-1].score-1e-6 {
						recall++
					}
					if ids[g.rid] {
						idRecall++
					}
				}
				for _, g := range more {
					if g.score >= want[len(want)-1].score-1e-6 {
						wider++
					}
				}
			}
			b.ResetTimer()
			i := 0
			for b.Loop() {
				denseRanking(p, queries[i%len(queries)], m, 10, DefaultANNBeam)
				i++
			}
			b.ReportMetric(recall/float64(10*len(queries)), "recall@10")
			b.ReportMetric(idRecall/float64(10*len(queries)), "idrecall@10")
			b.ReportMetric(wider/float64(10*len(queries)), "recall@10-2xbeam")
			b.ReportMetric(float64(exactTime.Microseconds())/float64(len(queries)), "exact-µs/op")
			b.ReportMetric(build.Seconds(), "build-s")
		})
	}
}

// benchEnvInt is the integer in the environment variable name, def when unset.
func benchEnvInt(b testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return n
}

// embedProse embeds n distinct paragraphs of the Go standard library's comments
// with the local embedder, in a seeded random order.
func embedProse(b *testing.B, n int) [][]float32 {
	var paras []string
	seen := map[string]bool{}
	var cur []string
	flush := func() {
		if t := strings.Join(cur, " "); len(cur) > 0 && !seen[t] {
			seen[t] = true
			paras = append(paras, t)
		}
		cur = nil
	}
	err := filepath.WalkDir(filepath.Join(runtime.GOROOT(), "src"), func(path string, d os.DirEntry, err error) error {
		if err != nil || len(paras) >= 3*n {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(src)) {
			line = strings.TrimSpace(line)
			text, ok := strings.CutPrefix(line, "// ")
			if !ok {
				flush()
				continue
			}
			// Paragraphs of about a memory's length.
			if cur = append(cur, text); len(strings.Fields(strings.Join(cur, " "))) > 20 {
				flush()
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(paras) < n {
		b.Skipf("only %d paragraphs of prose in GOROOT", len(paras))
	}
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(paras), func(i, j int) { paras[i], paras[j] = paras[j], paras[i] })
	emb, err := embed.NewLocal(embed.LocalConfig{})
	if err != nil {
		b.Fatal(err)
	}
	vecs, err := emb.Embed(context.Background(), paras[:n])
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range vecs {
		embed.Normalize(v)
	}
	return vecs
}

// randomVectors returns n unit vectors of DefaultLocalDimensions: around
// centres random centres (a centre plus Gaussian noise of 0.9 its length), or
// uniform on the sphere when centres is 0.
func randomVectors(n, centres int) [][]float32 {
	r := rand.New(rand.NewPCG(3, 4))
	gauss := func() []float32 {
		v := make([]float32, embed.DefaultLocalDimensions)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		embed.Normalize(v)
		return v
	}
	cs := make([][]float32, centres)
	for i := range cs {
		cs[i] = gauss()
	}
	out := make([][]float32, n)
	for i := range out {
		v := gauss()
		if centres > 0 {
			c := cs[r.IntN(centres)]
			for j := range v {
				v[j] = c[j] + 0.9*v[j]
			}
			embed.Normalize(v)
		}
		out[i] = v
	}
	return out
}

// BenchmarkGraphFile measures what a graph file saves a restart: building the
// graph of a partition of 20,000 records ($AGENTMEM_ANN_RECORDS) of clustered
// random vectors, against encoding it (what a save holds the partition for),
// and decoding the file and restoring the partition from it (what a load adds
// to reading the rows).
func BenchmarkGraphFile(b *testing.B) {
	records := benchEnvInt(b, "AGENTMEM_ANN_RECORDS", 20_000)
	const dims = 384
	vecs := randomVectors(records, 200)
	p := newPartition(graphTestKey, 1)
	recs := make([]*entry, records)
	for i, v := range vecs {
		r := vectorstore.Record{ID: fmt.Sprint(i), MemoryType: vectorstore.Episodic, Vector: v}
		p.put(newEntryNormalized(int64(i+1), r, ""))
		recs[i] = newEntryNormalized(int64(i+1), r, "")
	}
	p.ann[0].Store(&annIndex{g: newHNSW()})
	start := time.Now()
	for vs := new(visitSet); p.indexSome(vs); {
	}
	build := time.Since(start)
	var encode, restore time.Duration
	var size int
	for range b.N {
		st := time.Now()
		data := p.encodeGraphs(dims)
		encode += time.Since(st)
		size = len(data)
		st = time.Now()
		snap, err := decodeGraphs(data, graphTestKey, dims)
		if err != nil {
			b.Fatal(err)
		}
		newPartition(graphTestKey, 1).restore(snap, recs, dims)
		restore += time.Since(st)
	}
	b.ReportMetric(build.Seconds(), "build_s")
	b.ReportMetric(float64(encode.Milliseconds())/float64(b.N), "encode_ms")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore_ms")
	b.ReportMetric(float64(size)/(1<<20), "file_MiB")
}
