package wordvec_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/wordvec"
)

func TestDefaultTable(t *testing.T) {
	tb := wordvec.Default()
	if n := tb.Len(); n < 30000 || n > 40000 {
		t.Fatalf("Len = %d, want the ~34,000 stems of gen.go's 50,000 words", n)
	}
	// Known neighbours, looked up by index term as the retriever does.
	for _, pair := range [][2]string{{"pets", "dog"}, {"instruments", "guitar"}, {"sport", "soccer"}, {"allergic", "asthma"}} {
		from, to := bm25.Tokenize(pair[0])[0], bm25.Tokenize(pair[1])[0]
		sim := -1.0
		for _, n := range tb.Neighbours(from) {
			if n.Term == to {
				sim = n.Sim
			}
		}
		if sim < 0.5 {
			t.Errorf("%s → %s: similarity %v, want a neighbour at least 0.5", pair[0], pair[1], sim)
		}
	}
	for _, n := range tb.Neighbours(bm25.Tokenize("hobbies")[0]) {
		if n.Term == "the" || n.Term == "hobbi" {
			t.Errorf("hobbies has neighbour %q: a stopword or itself", n.Term)
		}
	}
	if tb.Neighbours("销售") != nil || tb.Neighbours("") != nil {
		t.Error("unknown terms have neighbours")
	}
	if r, ok := tb.Rank("new"); !ok || r > 10 {
		t.Errorf(`Rank("new") = %d, %v; want one of the first terms`, r, ok)
	}
	if _, ok := tb.Rank("zzzqqq"); ok {
		t.Error("an unknown term has a rank")
	}
}

// TestTableInvariants checks every term's list: no term twice, never itself,
// similarities in [0.45, 1] and best first, every neighbour a known term.
func TestTableInvariants(t *testing.T) {
	tb := wordvec.Default()
	for _, term := range []string{"music", "travel", "job", "paint", "famili", "car", "food"} {
		ns := tb.Neighbours(term)
		if len(ns) == 0 {
			t.Fatalf("%s has no neighbours", term)
		}
		seen := map[string]bool{}
		for i, n := range ns {
			if n.Term == term || seen[n.Term] || n.Sim < 0.44 || n.Sim > 1 || (i > 0 && n.Sim > ns[i-1].Sim) {
				t.Fatalf("%s: neighbour %d %+v breaks the table's order or range", term, i, n)
			}
			if _, ok := tb.Rank(n.Term); !ok {
				t.Fatalf("%s: neighbour %q is not a term", term, n.Term)
			}
			seen[n.Term] = true
		}
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

const magic = "agentmem-wordvec-2\n"

// vectors is the vector section of a table of two terms in two dimensions:
// ab = (1, 0), cd = (0, -1) at scale 1/127.
func vectors(scale float32) string {
	var b []byte
	b = append(b, 2)
	for _, v := range [][2]int8{{127, 0}, {0, -127}} {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scale))
		b = append(b, byte(v[0]), byte(v[1]))
	}
	return string(b)
}

// twoTerms is a valid table: ab and cd, each the other's neighbour.
var twoTerms = magic + "\x02\x02ab\x02cd\x01\x01\xff\x01\x00\x80" + vectors(1.0/127)

func TestParseRejectsMalformed(t *testing.T) {
	for name, data := range map[string][]byte{
		"not gzip":        []byte("hello"),
		"wrong header":    gz([]byte("something else\n")),
		"no term count":   gz([]byte(magic)),
		"truncated term":  gz([]byte(magic + "\x01\x05ab")),
		"self neighbour":  gz([]byte(magic + "\x01\x02ab\x01\x00\x80")),
		"unordered sims":  gz([]byte(magic + "\x03\x02ab\x02cd\x02ef\x02\x01\x10\x02\x20\x00\x00")),
		"no vectors":      gz([]byte(magic + "\x01\x02ab\x00")),
		"short vectors":   gz([]byte(twoTerms[:len(twoTerms)-1])),
		"scale too large": gz([]byte(magic + "\x02\x02ab\x02cd\x01\x01\xff\x01\x00\x80" + vectors(2))),
		"too many dims":   gz([]byte(magic + "\x01\x02ab\x00\xff\xff\x03")),
		"trailing bytes":  gz([]byte(twoTerms + "x")),
		"repeated term":   gz([]byte(magic + "\x02\x02ab\x02ab\x00\x00")),
		"huge term count": gz([]byte(magic + "\xff\xff\xff\xff\x0f")),
	} {
		if _, err := wordvec.Parse(bytes.NewReader(data)); !errors.Is(err, wordvec.ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat", name, err)
		}
	}
	tb, err := wordvec.Parse(bytes.NewReader(gz([]byte(twoTerms))))
	if err != nil {
		t.Fatal(err)
	}
	if ns := tb.Neighbours("ab"); len(ns) != 1 || ns[0] != (wordvec.Neighbour{Term: "cd", Sim: 1}) {
		t.Errorf("ab's neighbours = %+v, want cd at 1", ns)
	}
	v := make([]float32, tb.Dims())
	if !tb.AddVector(v, "cd", 2) || tb.AddVector(v, "zz", 1) || v[0] != 0 || math.Abs(float64(v[1])+2) > 1e-6 {
		t.Errorf("2 × cd = %v, want [0 -2]", v)
	}
}

// TestVectorsAgreeWithNeighbours: the cosine of two terms' int8 vectors is
// their neighbour similarity, within the quantisation's error.
func TestVectorsAgreeWithNeighbours(t *testing.T) {
	tb := wordvec.Default()
	if tb.Dims() != 100 {
		t.Fatalf("Dims = %d, want GloVe's 100", tb.Dims())
	}
	vec := func(term string) []float32 {
		v := make([]float32, tb.Dims())
		if !tb.AddVector(v, term, 1) {
			t.Fatalf("no vector for %q", term)
		}
		return v
	}
	for _, term := range []string{"pet", "instrument", "music", "travel"} {
		a := vec(term)
		for _, n := range tb.Neighbours(term)[:3] {
			b := vec(n.Term)
			var dot, na, nb float64
			for i := range a {
				dot += float64(a[i] * b[i])
				na += float64(a[i] * a[i])
				nb += float64(b[i] * b[i])
			}
			if math.Abs(na-1) > 0.02 || math.Abs(dot/math.Sqrt(na*nb)-n.Sim) > 0.02 {
				t.Errorf("%s·%s: |a|² %.3f, cosine %.3f, want 1 and %.3f", term, n.Term, na, dot/math.Sqrt(na*nb), n.Sim)
			}
		}
	}
}

// FuzzParse: no input crashes Parse, and what it accepts is a consistent table.
func FuzzParse(f *testing.F) {
	f.Add([]byte(twoTerms))
	f.Add([]byte(magic + "\x01\x02ab\x00\x00"))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, body []byte) {
		tb, err := wordvec.Parse(bytes.NewReader(gz(body)))
		if err != nil {
			if !errors.Is(err, wordvec.ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		v := make([]float32, tb.Dims())
		for _, term := range []string{"ab", "cd"} {
			tb.AddVector(v, term, 1)
			for _, n := range tb.Neighbours(term) {
				if n.Term == term || n.Sim < 0 || n.Sim > 1 {
					t.Fatalf("%s: bad neighbour %+v", term, n)
				}
			}
		}
	})
}
