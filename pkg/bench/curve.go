package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// CurveSizes are the namespace sizes of the cost curve (Config.Curve).
var CurveSizes = []int{1_000, 10_000, 100_000}

// curveRequests is how many context requests each curve size times, after a
// warm-up of a tenth (the first also loads the partition).
const curveRequests = 300

// CurvePoint is the context latency of one namespace of Memories memories.
type CurvePoint struct {
	Memories int     `json:"memories"`
	CtxP50us float64 `json:"ctx_p50_us"`
	CtxP99us float64 `json:"ctx_p99_us"`
}

// curve measures how a context request's cost grows with its namespace: for each
// of CurveSizes, one user of its own tenant holding that many memories (built
// as the load phase builds them, without Markdown), and curveRequests context
// requests against it. A store whose search is linear in the namespace shows it
// here, where the default load (spread over many users) cannot.
func (b *bencher) curve(ctx context.Context, res *Result) error {
	if !b.cfg.Curve {
		return nil
	}
	sizes := b.cfg.CurveSizes
	if sizes == nil {
		sizes = CurveSizes
	}
	for _, size := range sizes {
		tenant := fmt.Sprintf("bench-curve-%d", size)
		fmt.Fprintf(b.cfg.Progress, "== cost curve: one namespace of %d memories\n", size)
		batches := make(chan []vectorstore.Record, 2)
		genErr := make(chan error, 1)
		genCtx, cancel := context.WithCancel(ctx)
		go func() {
			defer close(batches)
			genErr <- b.generate(genCtx, tenant, size, 1, batches)
		}()
		var err error
		for batch := range batches {
			if err == nil {
				err = b.rt.Vectors.Upsert(ctx, batch...)
			}
		}
		cancel()
		if gerr := <-genErr; err == nil && gerr != nil {
			err = gerr
		}
		if err != nil {
			return fmt.Errorf("bench: curve: load %d memories: %w", size, err)
		}
		p50, p99, err := b.timeContext(ctx, tenant, curveRequests)
		if err != nil {
			return err
		}
		res.Curve = append(res.Curve, CurvePoint{Memories: size, CtxP50us: p50, CtxP99us: p99})
		switch size {
		case 1_000:
			res.CurveCtxP99us1k = p99
		case 10_000:
			res.CurveCtxP99us10k = p99
		case 100_000:
			res.CurveCtxP99us100k = p99
		}
	}
	return nil
}

// timeContext times n context requests (after a warm-up of a tenth) for the
// asked user of tenant, and returns their p50 and p99 in µs.
func (b *bencher) timeContext(ctx context.Context, tenant string, n int) (p50, p99 float64, err error) {
	subject, err := events.RPCSubject(tenant, events.EndpointContext)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: %w", err)
	}
	gen := newTexts(5)
	warmup := max(1, n/10)
	lat := make([]time.Duration, 0, n)
	for i := range warmup + n {
		req := events.ContextRequest{UserID: askedUser, AgentID: agentID, Query: gen.query()}
		data, err := json.Marshal(req)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: %w", err)
		}
		t0 := time.Now()
		reply, err := b.nc.RequestWithContext(ctx, subject, data)
		d := time.Since(t0)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: context request: %w", ErrMeasurement, err)
		}
		pack, err := decodePack(reply)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: context request: %w", ErrMeasurement, err)
		}
		if pack.Counts.EpisodicItems+pack.Counts.SemanticItems == 0 {
			return 0, 0, fmt.Errorf("%w: the context pack for %q recalled no memories (counts %+v)", ErrMeasurement, req.Query, pack.Counts)
		}
		if i >= warmup {
			lat = append(lat, d)
		}
	}
	return micros(percentile(lat, 0.50)), micros(percentile(lat, 0.99)), nil
}
