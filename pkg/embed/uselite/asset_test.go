package uselite

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/embed"
)

// embedded loads the encoder of the embedded weights once per test binary.
var embedded = sync.OnceValues(func() (*Encoder, error) { return New(Config{}, nil) })

func embeddedEncoder(t testing.TB) *Encoder {
	t.Helper()
	enc, err := embedded()
	if err != nil {
		t.Fatalf("New with the embedded weights: %v", err)
	}
	return enc
}

// minEmbeddedCosine is the least cosine the embedded (int8) weights' vectors
// must keep with the JavaScript model's float32 ones; the 20 reference texts
// measure 0.99906 at worst.
const minEmbeddedCosine = 0.997

func referenceTexts(cases []reference) []string {
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
	}
	return texts
}

// TestEmbeddedMatchesReference needs no model files: the embedded weights'
// vectors stay close to the JavaScript model's (testdata/vectors.json).
func TestEmbeddedMatchesReference(t *testing.T) {
	enc := embeddedEncoder(t)
	if enc.Name() != "use-lite-v1-int8-512" {
		t.Errorf("Name() = %q, want use-lite-v1-int8-512", enc.Name())
	}
	cases := readReferences(t, "vectors.json")
	got, err := enc.Embed(context.Background(), referenceTexts(cases))
	if err != nil {
		t.Fatal(err)
	}
	worst := float32(1)
	for i, c := range cases {
		cos := embed.Cosine(got[i], c.Vector)
		worst = min(worst, cos)
		if cos < minEmbeddedCosine {
			t.Errorf("cosine with the reference for %.40q = %.6f, want >= %v", c.Text, cos, minEmbeddedCosine)
		}
	}
	t.Logf("embedded weights: lowest cosine with the reference over %d texts: %.5f", len(cases), worst)
	for _, c := range readReferences(t, "tokens.json") {
		if got := enc.tok.Encode(c.Text); !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
			t.Errorf("embedded vocabulary: Encode(%q) = %v, want %v", c.Text, got, c.IDs)
		}
	}
}

// TestEmbeddedMatchesFloat32 compares the embedded weights with the npm
// package's float32 ones: the asset is what gen.go makes of them, small tensors
// are exact, and the vectors stay close.
func TestEmbeddedMatchesFloat32(t *testing.T) {
	exact := encoder(t)
	var made bytes.Buffer
	if err := WriteAsset(&made, modelDir(t)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(made.Bytes(), embeddedAsset) {
		t.Errorf("model.bin.gz (%d bytes) is not what WriteAsset makes of the npm files (%d bytes): run gen.go", len(embeddedAsset), made.Len())
	}
	vocab, err := readModelFile(modelDir(t), "vocab.json")
	if err != nil {
		t.Fatal(err)
	}
	weights, err := readModelWeights(modelDir(t))
	if err != nil {
		t.Fatal(err)
	}
	evocab, eweights, err := loadAsset(embeddedAsset)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(vocab, evocab) || len(weights) != len(eweights) {
		t.Fatalf("embedded asset: vocab equal %v, %d tensors, want %d", bytes.Equal(vocab, evocab), len(eweights), len(weights))
	}
	for name, w := range weights {
		e := eweights[name]
		if !slices.Equal(w.shape, e.shape) || !slices.Equal(w.i32, e.i32) || len(w.f32) != len(e.f32) {
			t.Errorf("tensor %s differs in shape or type", name)
			continue
		}
		if len(w.f32) < quantizeMin && !slices.Equal(w.f32, e.f32) {
			t.Errorf("small tensor %s is not kept exactly", name)
		}
	}
	cases := readReferences(t, "vectors.json")
	want, err := exact.Embed(context.Background(), referenceTexts(cases))
	if err != nil {
		t.Fatal(err)
	}
	got, err := embeddedEncoder(t).Embed(context.Background(), referenceTexts(cases))
	if err != nil {
		t.Fatal(err)
	}
	worst := float32(1)
	for i := range cases {
		worst = min(worst, embed.Cosine(got[i], want[i]))
	}
	if worst < minEmbeddedCosine {
		t.Errorf("lowest cosine of the embedded and the float32 weights' vectors = %.5f, want >= %v", worst, minEmbeddedCosine)
	}
	t.Logf("embedded weights: lowest cosine with the float32 weights over %d texts: %.5f", len(cases), worst)
}

// smallWeights is a model-shaped set of tensors in every encoding.
func smallWeights() map[string]tensor {
	big := make([]float32, quantizeMin)
	for i := range big {
		big[i] = float32(math.Sin(float64(i))) * float32(1+i%7)
	}
	return map[string]tensor{
		embeddingName: {shape: []int{quantizeMin / embedDim, embedDim}, f32: big},
		"kernel":      {shape: []int{1, 1, 64, quantizeMin / 64}, f32: slices.Clone(big)},
		"bias":        {shape: []int{3}, f32: []float32{0.5, -1e-7, 3}},
		"scalar":      {shape: []int{}, f32: []float32{-2}},
		"n":           {shape: []int{}, i32: []int32{128}},
		"zeros":       {shape: []int{quantizeMin}, f32: make([]float32, quantizeMin)},
	}
}

func encodeSmall(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encodeAsset(&buf, []byte(`[["a",0]]`), smallWeights()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func unpack(t testing.TB, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestAssetRoundTrip: small tensors and int32 come back exactly, with their
// shapes and the vocabulary.
func TestAssetRoundTrip(t *testing.T) {
	want := smallWeights()
	vocab, got, err := loadAsset(encodeSmall(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(vocab) != `[["a",0]]` || len(got) != len(want) {
		t.Fatalf("vocab %q, %d tensors; want the vocab written and %d tensors", vocab, len(got), len(want))
	}
	for name, w := range want {
		g := got[name]
		if !slices.Equal(g.shape, w.shape) || !slices.Equal(g.i32, w.i32) || len(g.f32) != len(w.f32) {
			t.Fatalf("%s: shape %v, %d floats, ints %v; want %v, %d, %v", name, g.shape, len(g.f32), g.i32, w.shape, len(w.f32), w.i32)
		}
		if len(w.f32) < quantizeMin && !slices.Equal(g.f32, w.f32) {
			t.Errorf("%s = %v, want %v exactly", name, g.f32, w.f32)
		}
	}
}

// Property: a matrix stored as int8 comes back within half a quantisation step
// (its row's largest magnitude / 127 for the embedding table, its column's for
// a kernel) of every value, whatever its shape and the spread of its scales.
func TestPropertyInt8WithinHalfAStep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.SampledFrom([]string{embeddingName, "kernel"}).Draw(t, "name")
		cols := rapid.IntRange(1, 300).Draw(t, "cols")
		rows := (quantizeMin+cols-1)/cols + rapid.IntRange(0, 3).Draw(t, "extra rows")
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
		spread := rapid.Float64Range(0, 30).Draw(t, "log2 spread of the scales")
		groupScale := map[int]float64{}
		byCol := name != embeddingName
		group := func(i int) int {
			if byCol {
				return i % cols
			}
			return i / cols
		}
		v := make([]float32, rows*cols)
		for i := range v {
			g := group(i)
			if _, ok := groupScale[g]; !ok {
				groupScale[g] = math.Exp2(rng.Float64()*spread - spread/2)
			}
			if rng.IntN(10) > 0 { // some zeros, and all-zero groups now and then
				v[i] = float32(rng.NormFloat64() * groupScale[g])
			}
		}
		var buf bytes.Buffer
		w := tensor{shape: []int{rows, cols}, f32: v}
		if err := encodeAsset(&buf, nil, map[string]tensor{name: w}); err != nil {
			t.Fatal(err)
		}
		_, got, err := loadAsset(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		largest := map[int]float64{}
		for i, x := range v {
			largest[group(i)] = max(largest[group(i)], math.Abs(float64(x)))
		}
		g := got[name].f32
		for i, x := range v {
			if d := math.Abs(float64(g[i] - x)); d > largest[group(i)]/127/2*1.0001 {
				t.Fatalf("value %d = %v, want %v within half a step of %v/127", i, g[i], x, largest[group(i)])
			}
		}
	})
}

func TestParseAssetRejects(t *testing.T) {
	raw := unpack(t, encodeSmall(t))
	body := raw[len(assetMagic):]
	vocabLen := 1 + 9 // uvarint 9, then [["a",0]]
	for name, bad := range map[string][]byte{
		"empty":           nil,
		"wrong magic":     append([]byte("agentmem-uselite-0\n"), body...),
		"truncated":       raw[:len(raw)-1],
		"trailing bytes":  append(slices.Clone(raw), 0),
		"no tensor count": raw[:len(assetMagic)+vocabLen],
		"huge vocab":      append([]byte(assetMagic), 0xff, 0xff, 0xff, 0xff, 0x7f),
		"bad varint":      append([]byte(assetMagic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"too many tensors": append(append([]byte(assetMagic), raw[len(assetMagic):len(assetMagic)+vocabLen]...),
			0xff, 0xff, 0x03),
		"duplicate name": tensorAsset("n", encInt32, []int{}, 4, "n", encInt32, []int{}, 4),
		"bad encoding":   tensorAsset("x", 9, []int{1}, 4),
		"huge shape":     tensorAsset("x", encFloat32, []int{1 << 30, 1 << 30}, 16),
		"int8 scalar":    tensorAsset("x", encInt8Cols, []int{}, 8),
		"int8 empty row": tensorAsset("x", encInt8Rows, []int{4, 0}, 8),
		"rank too big":   tensorAsset("x", encFloat32, make([]int, maxRank+1), 4),
	} {
		if _, _, err := parseAsset(bad); !errors.Is(err, ErrCorruptModel) {
			t.Errorf("%s: error %v, want ErrCorruptModel", name, err)
		}
	}
	if _, _, err := loadAsset([]byte("not gzip")); !errors.Is(err, ErrCorruptModel) {
		t.Errorf("not gzip: error %v, want ErrCorruptModel", err)
	}
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestSpeed)
	if _, err := zw.Write(make([]byte, maxAssetBytes+1)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadAsset(bomb.Bytes()); !errors.Is(err, ErrCorruptModel) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("an asset unpacking past the bound: error %v, want ErrCorruptModel", err)
	}
}

// tensorAsset builds an unpacked asset with an empty vocab and the tensors
// given as (name, encoding, shape, value bytes) groups, the values zero.
func tensorAsset(specs ...any) []byte {
	b := append([]byte(assetMagic), 0, byte(len(specs)/4))
	for i := 0; i+3 < len(specs); i += 4 {
		name, enc, shape, n := specs[i].(string), specs[i+1].(int), specs[i+2].([]int), specs[i+3].(int)
		b = append(b, byte(len(name)))
		b = append(b, name...)
		b = append(b, byte(enc), byte(len(shape)))
		for _, d := range shape {
			b = binary.AppendUvarint(b, uint64(d))
		}
		b = append(b, make([]byte, n)...)
	}
	return b
}

func FuzzParseAsset(f *testing.F) {
	f.Add(unpack(f, encodeSmall(f)))
	f.Add(tensorAsset("n", encInt32, []int{}, 4, "x", encInt8Rows, []int{2, 2}, 12))
	f.Add(tensorAsset("x", encInt8Cols, []int{3, 1}, 7))
	f.Add(tensorAsset("x", encFloat32, []int{0, 1 << 40}, 0))
	f.Fuzz(func(t *testing.T, raw []byte) {
		vocab, weights, err := parseAsset(raw)
		if err != nil {
			if !errors.Is(err, ErrCorruptModel) {
				t.Fatalf("error %v does not wrap ErrCorruptModel", err)
			}
			return
		}
		if len(vocab) > len(raw) {
			t.Fatalf("vocab of %d bytes from %d", len(vocab), len(raw))
		}
		for name, w := range weights {
			n := 1
			for _, d := range w.shape {
				n *= d
			}
			if len(w.f32)+len(w.i32) != n {
				t.Fatalf("tensor %s shape %v holds %d values", name, w.shape, len(w.f32)+len(w.i32))
			}
		}
		if _, err := newModel(weights); err != nil && !errors.Is(err, ErrCorruptModel) {
			t.Fatalf("newModel error %v does not wrap ErrCorruptModel", err)
		}
	})
}
