package embed

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestSparse(t *testing.T) {
	v := Sparse("Sales files, sales FILES and sales.")
	if len(v.Indices) != 2 {
		t.Fatalf("got %d entries, want 2 (sale, file): %+v", len(v.Indices), v)
	}
	want := map[uint32]float32{
		fnv32a("sale"): float32(3 * (SparseK1 + 1) / (3 + SparseK1)),
		fnv32a("file"): float32(2 * (SparseK1 + 1) / (2 + SparseK1)),
	}
	for i, ix := range v.Indices {
		w, ok := want[ix]
		if !ok {
			t.Fatalf("unexpected index %d", ix)
		}
		if math.Abs(float64(v.Values[i]-w)) > 1e-6 {
			t.Errorf("index %d: value %v, want %v", ix, v.Values[i], w)
		}
	}
	if e := Sparse("the and of"); len(e.Indices) != 0 || len(e.Values) != 0 {
		t.Fatalf("stopwords only: %+v, want empty", e)
	}
}

// Property: indices strictly ascending (sorted, no duplicates), one value per index,
// every value a saturated tf in [1, k1+1).
func TestPropertySparseSortedUniqueSaturated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := Sparse(rapid.String().Draw(t, "text"))
		if len(v.Indices) != len(v.Values) {
			t.Fatalf("%d indices, %d values", len(v.Indices), len(v.Values))
		}
		for i := range v.Indices {
			if i > 0 && v.Indices[i] <= v.Indices[i-1] {
				t.Fatalf("indices not strictly ascending: %v", v.Indices)
			}
			if x := v.Values[i]; x < 1 || x >= SparseK1+1 {
				t.Fatalf("value %v outside [1, %v)", x, SparseK1+1)
			}
		}
	})
}

func TestSparseWith(t *testing.T) {
	v := Sparse("sales files")
	w := v.With("guitar", 0.25).With("sale", 0.5)
	if len(v.Indices) != 2 {
		t.Fatalf("With modified its receiver: %+v", v)
	}
	if len(w.Indices) != 3 || !slices.IsSorted(w.Indices) {
		t.Fatalf("got %+v, want three sorted entries", w)
	}
	for i, ix := range w.Indices {
		switch ix {
		case fnv32a("guitar"):
			if w.Values[i] != 0.25 {
				t.Errorf("guitar = %v, want 0.25", w.Values[i])
			}
		case fnv32a("sale"):
			if w.Values[i] != 1 {
				t.Errorf("sale = %v, want the text's 1, not the added 0.5", w.Values[i])
			}
		}
	}
}
