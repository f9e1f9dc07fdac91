package uselite

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"
)

// tensor is one weight of the TF.js graph model: float32 or int32 values in
// row-major order.
type tensor struct {
	shape []int
	f32   []float32
	i32   []int32
}

type manifestGroup struct {
	Paths   []string `json:"paths"`
	Weights []struct {
		Name         string          `json:"name"`
		Shape        []int           `json:"shape"`
		DType        string          `json:"dtype"`
		Quantization json.RawMessage `json:"quantization"`
	} `json:"weights"`
}

// maxShardBytes bounds one weight group, so that a corrupt manifest cannot make
// the loader allocate without limit (the real model is 28 MB).
const maxShardBytes = 1 << 30

// parseWeights decodes a TF.js model.json's weightsManifest: each group's shards,
// concatenated in order, hold its weights back to back, little-endian. readShard
// returns a shard's bytes by the file name the manifest gives.
func parseWeights(modelJSON []byte, readShard func(name string) ([]byte, error)) (map[string]tensor, error) {
	var m struct {
		WeightsManifest []manifestGroup `json:"weightsManifest"`
	}
	if err := json.Unmarshal(modelJSON, &m); err != nil {
		return nil, fmt.Errorf("%w: model.json: %w", ErrCorruptModel, err)
	}
	if len(m.WeightsManifest) == 0 {
		return nil, fmt.Errorf("%w: model.json has no weightsManifest", ErrCorruptModel)
	}
	out := make(map[string]tensor)
	for gi, g := range m.WeightsManifest {
		var buf []byte
		for _, p := range g.Paths {
			// Shards live next to model.json; a path that leaves the directory is
			// not a model file.
			if p == "" || path.Base(p) != p || p == "." || p == ".." || slices.Contains([]byte(p), '\\') {
				return nil, fmt.Errorf("%w: model.json shard path %q is not a plain file name", ErrCorruptModel, p)
			}
			b, err := readShard(p)
			if err != nil {
				return nil, err
			}
			if len(buf)+len(b) > maxShardBytes {
				return nil, fmt.Errorf("%w: weight group %d is larger than %d bytes", ErrCorruptModel, gi, maxShardBytes)
			}
			buf = append(buf, b...)
		}
		off := 0
		for _, w := range g.Weights {
			if len(w.Quantization) > 0 && string(w.Quantization) != "null" {
				return nil, fmt.Errorf("%w: weight %s is quantized, which is not supported", ErrCorruptModel, w.Name)
			}
			n := 1
			for _, d := range w.Shape {
				if d < 0 || (d > 0 && n > (len(buf)-off)/4/d) {
					return nil, fmt.Errorf("%w: weight %s shape %v does not fit the %d shard bytes left", ErrCorruptModel, w.Name, w.Shape, len(buf)-off)
				}
				n *= d
			}
			if off+4*n > len(buf) {
				return nil, fmt.Errorf("%w: weight %s shape %v does not fit the %d shard bytes left", ErrCorruptModel, w.Name, w.Shape, len(buf)-off)
			}
			raw := buf[off : off+4*n]
			off += 4 * n
			t := tensor{shape: slices.Clone(w.Shape)}
			switch w.DType {
			case "float32":
				t.f32 = make([]float32, n)
				for i := range t.f32 {
					t.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				}
			case "int32":
				t.i32 = make([]int32, n)
				for i := range t.i32 {
					t.i32[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
				}
			default:
				return nil, fmt.Errorf("%w: weight %s has dtype %q, want float32 or int32", ErrCorruptModel, w.Name, w.DType)
			}
			out[w.Name] = t
		}
		if off != len(buf) {
			return nil, fmt.Errorf("%w: weight group %d has %d bytes, its weights need %d", ErrCorruptModel, gi, len(buf), off)
		}
	}
	return out, nil
}

// weightSet looks weights up by name and checks their shapes, remembering the
// first problem so that a model is built in one pass and checked once.
type weightSet struct {
	w   map[string]tensor
	err error
}

func (s *weightSet) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: "+format, append([]any{ErrCorruptModel}, args...)...)
	}
}

// floats returns the float32 weight name, which must have n values (any shape
// with that many elements: Conv2D 1x1 kernels are [1,1,in,out] matrices).
func (s *weightSet) floats(name string, n int) []float32 {
	t, ok := s.w[name]
	switch {
	case !ok:
		s.fail("weight %s is missing", name)
	case t.f32 == nil && n > 0:
		s.fail("weight %s is not float32", name)
	case len(t.f32) != n:
		s.fail("weight %s has %d values (shape %v), want %d", name, len(t.f32), t.shape, n)
	default:
		return t.f32
	}
	return make([]float32, n)
}

// scalar returns a float32 scalar weight.
func (s *weightSet) scalar(name string) float32 { return s.floats(name, 1)[0] }

// int returns an int32 scalar weight.
func (s *weightSet) int(name string) int {
	t, ok := s.w[name]
	if !ok || len(t.i32) != 1 {
		s.fail("weight %s is missing or not an int32 scalar", name)
		return 0
	}
	return int(t.i32[0])
}
