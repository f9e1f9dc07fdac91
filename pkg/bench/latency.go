package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/agentmem/agentmem/events"
)

// echoSubject is the bare responder's subject; no stream captures it.
const echoSubject = "agentmem-bench.echo"

// latency times a bare echo round trip and a context request alternately on the
// measuring connection, with the same request bytes, so that both see the same
// network path, server and background load. Both clocks stop when the reply's
// bytes have arrived; decoding the pack is the caller's work, not the service's,
// and is reported apart (ctx_decode_p50_us). The requests whose query was not
// asked before (the query embedding cache cannot answer them) are also timed
// apart (ctx_new_query_*). The echo responder is on its own
// in-process connection, as the retriever is.
func (b *bencher) latency(ctx context.Context, res *Result) error {
	fmt.Fprintf(b.cfg.Progress, "== timing %d bare NATS round trips and %d context requests (user with %d memories, %d-line MEMORY.md, topic files, an open session)\n",
		b.cfg.Requests, b.cfg.Requests, b.cfg.Memories/b.cfg.Users, memoryLines)
	conn, err := b.rt.Dial("agentmem-bench-echo")
	if err != nil {
		return err
	}
	defer conn.Close()
	echo, err := micro.AddService(conn, micro.Config{Name: "agentmem-bench-echo", Version: "1.0.0", Endpoint: &micro.EndpointConfig{
		Subject: echoSubject, Handler: micro.HandlerFunc(func(req micro.Request) { _ = req.Respond(req.Data()) }),
	}})
	if err != nil {
		return fmt.Errorf("bench: echo service: %w", err)
	}
	defer func() { _ = echo.Stop() }()
	// The subscription travels to the server asynchronously; without the flush the
	// first request can find no responder.
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("bench: echo service: %w", err)
	}
	ctxSubject, err := events.RPCSubject(tenantLoad, events.EndpointContext)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	gen := newTexts(4)
	warmup := max(1, b.cfg.Requests/10)
	echoLat := make([]time.Duration, 0, b.cfg.Requests)
	ctxLat := make([]time.Duration, 0, b.cfg.Requests)
	decodeLat := make([]time.Duration, 0, b.cfg.Requests)
	var newQueryLat []time.Duration // requests whose query was not asked before
	asked := map[string]bool{}
	tokens := 0
	prog := newProgress(b.cfg.Progress, "request pairs", b.cfg.Requests)
	for i := range warmup + b.cfg.Requests {
		req := events.ContextRequest{UserID: askedUser, AgentID: agentID, SessionID: askedSession, Query: gen.query()}
		repeated := asked[req.Query]
		asked[req.Query] = true
		data, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		t0 := time.Now()
		if _, err := b.nc.RequestWithContext(ctx, echoSubject, data); err != nil {
			return fmt.Errorf("%w: echo request: %w", ErrMeasurement, err)
		}
		t1 := time.Now()
		pack, took, decoded, err := b.askContext(ctx, ctxSubject, req.Query, data)
		if err != nil {
			return err
		}
		if i < warmup {
			continue
		}
		echoLat = append(echoLat, t1.Sub(t0))
		ctxLat = append(ctxLat, took)
		if !repeated {
			newQueryLat = append(newQueryLat, took)
		}
		decodeLat = append(decodeLat, decoded)
		tokens += pack.TokenEstimate
		prog.update(len(ctxLat))
	}
	prog.finish(len(ctxLat))
	res.NATSRRP50us, res.NATSRRP99us = micros(percentile(echoLat, 0.50)), micros(percentile(echoLat, 0.99))
	res.CtxP50us, res.CtxP99us = micros(percentile(ctxLat, 0.50)), micros(percentile(ctxLat, 0.99))
	res.CtxDecodeP50us = micros(percentile(decodeLat, 0.50))
	res.CtxNewQueries = len(newQueryLat)
	res.CtxNewQueryP50us, res.CtxNewQueryP99us = micros(percentile(newQueryLat, 0.50)), micros(percentile(newQueryLat, 0.99))
	res.CtxAvgTokens = float64(tokens) / float64(len(ctxLat))
	return nil
}

// askContext sends the context request data (asking query) to subject and
// checks its pack: took is until the reply's bytes arrived, decoded the
// decoding after.
func (b *bencher) askContext(ctx context.Context, subject, query string, data []byte) (pack events.ContextPack, took, decoded time.Duration, err error) {
	t1 := time.Now()
	reply, err := b.nc.RequestWithContext(ctx, subject, data)
	t2 := time.Now()
	if err != nil {
		return pack, 0, 0, fmt.Errorf("%w: context request: %w", ErrMeasurement, err)
	}
	pack, err = decodePack(reply)
	decoded = time.Since(t2)
	if err != nil {
		return pack, 0, 0, fmt.Errorf("%w: context request: %w", ErrMeasurement, err)
	}
	if pack.Core == nil || pack.Counts.EpisodicItems+pack.Counts.SemanticItems == 0 {
		return pack, 0, 0, fmt.Errorf("%w: the context pack for %q lacks the core memory or the recalled memories (counts %+v)", ErrMeasurement, query, pack.Counts)
	}
	return pack, t2.Sub(t1), decoded, nil
}

// decodePack is what a client does with a context reply: an error reply (micro's
// error headers) fails, anything else must be a pack.
func decodePack(reply *nats.Msg) (events.ContextPack, error) {
	var pack events.ContextPack
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return pack, fmt.Errorf("error reply %s: %s", code, reply.Header.Get(micro.ErrorHeader))
	}
	if err := json.Unmarshal(reply.Data, &pack); err != nil {
		return pack, fmt.Errorf("undecodable pack: %w", err)
	}
	return pack, nil
}

// percentile is the nearest-rank p-quantile (0 < p ≤ 1) of ds: the smallest value
// with at least p of the samples at or below it. ds is sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(p * float64(len(ds))))
	return ds[min(max(rank, 1), len(ds))-1]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
