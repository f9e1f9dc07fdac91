package vectorstore_test

import (
	"errors"
	"math"
	"testing"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Record.Normalize refuses a vector holding NaN or ±Inf, and keeps every finite
// one, the extremes and signed zeros included.
func TestRecordNormalizeVectorValues(t *testing.T) {
	tiny := math.Float32frombits(1) // the smallest subnormal
	for _, c := range []struct {
		x  float32
		ok bool
	}{
		{0, true}, {float32(math.Copysign(0, -1)), true}, {tiny, true}, {-tiny, true},
		{math.MaxFloat32, true}, {-math.MaxFloat32, true}, {1.5, true},
		{float32(math.NaN()), false}, {float32(math.Inf(1)), false}, {float32(math.Inf(-1)), false},
	} {
		r := vectorstore.Record{
			ID: vectorstore.DeterministicID("normalize"), Tenant: "acme", UserID: "u1",
			MemoryType: vectorstore.Episodic, Vector: []float32{0.5, c.x, -0.5},
		}
		_, err := r.Normalize(3)
		if c.ok && err != nil || !c.ok && !errors.Is(err, vectorstore.ErrInvalidRecord) {
			t.Errorf("vector component %v: Normalize error %v, want ok=%v", c.x, err, c.ok)
		}
	}
}
