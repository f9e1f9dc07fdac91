package retrieve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// BenchmarkContext measures a context request over NATS (in-process server; a
// 200-line MEMORY.md, a session, a user with 100 vector memories among 2,100) next
// to a bare micro echo round trip on the same connection, the target (docs/operations.md "Benchmarks")
// being p99 within 5x of the echo; context_lightweight skips the vector recall,
// topics and chunks. Each sub-benchmark reports p50 and p99 latency.
func BenchmarkContext(b *testing.B) {
	r := newRig(b)
	r.start(Config{})
	r.write("u1", "MEMORY.md", lines(200))
	r.write("u1", "file_patterns.md", "Sales files: columns date, product, qty.\n")
	for i := 0; i < 20; i++ {
		r.observe("u1", "s1", fmt.Sprintf("message %d about the sales files", i), nil)
	}
	ctx := context.Background()
	var recs []vectorstore.Record
	for u := 0; u < 21; u++ {
		user := fmt.Sprintf("u%d", u+1)
		texts := make([]string, 100)
		for i := range texts {
			texts[i] = fmt.Sprintf("memory %d of %s: the sales files of region %d have columns date, product and qty %d", i, user, i%7, i)
		}
		vecs, err := r.emb.Embed(ctx, texts)
		must(b, err)
		for i, text := range texts {
			recs = append(recs, vectorstore.Record{
				ID: vectorstore.DeterministicID(tenant, user, text), Tenant: tenant, UserID: user, MemoryType: []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic}[i%2],
				Text: text, Vector: vecs[i], TS: r.now, ChatID: "s0",
				Metadata: map[string]any{records.MetaSourceEventIDs: []string{fmt.Sprintf("ev%d", i)}, records.MetaSourceMeta: []map[string]any{{"dia_id": fmt.Sprintf("D1:%d", i)}}},
			})
		}
	}
	must(b, r.vectors.Upsert(ctx, recs...))

	echo, err := micro.AddService(r.nc, micro.Config{Name: "echo", Version: "1.0.0", Endpoint: &micro.EndpointConfig{
		Subject: "bench.echo", Handler: micro.HandlerFunc(func(req micro.Request) { _ = req.Respond(req.Data()) }),
	}})
	must(b, err)
	b.Cleanup(func() { _ = echo.Stop() })

	req, _ := json.Marshal(events.ContextRequest{UserID: "u1", AgentID: "bot", SessionID: "s1", Query: "which columns do my sales files have?"})
	light, _ := json.Marshal(events.ContextRequest{UserID: "u1", AgentID: "bot", SessionID: "s1", Query: "which columns do my sales files have?", Lightweight: true})
	contextSubject, _ := events.RPCSubject(tenant, events.EndpointContext)
	for _, bc := range []struct {
		name, subject string
		req           []byte
	}{{"bare_echo", "bench.echo", req}, {"context", contextSubject, req}, {"context_lightweight", contextSubject, light}} {
		b.Run(bc.name, func(b *testing.B) { requestLatency(b, r.nc, bc.subject, bc.req) })
	}
}

// BenchmarkContextSummarisedSession compares, interleaved, the lightweight pack
// of a session under its summary trigger (20 messages) with that of one past
// it with no summary written yet (40 messages: the pack digests all but the
// last 4, the offline summariser's lines of each message cached after the
// first request). Each sub-benchmark reports p50 and p99 latency.
func BenchmarkContextSummarisedSession(b *testing.B) {
	r := newRig(b)
	r.start(Config{})
	for _, s := range []struct {
		id string
		n  int
	}{{"s1", 20}, {"s2", 40}} {
		for i := range s.n {
			r.observe("u1", s.id, fmt.Sprintf("Hey Caroline, message %d about the sales files. We talked about report_%d.csv and the deadline 2026-12-%02d. It was great!", i, i, i%28+1), nil)
		}
	}
	subject, _ := events.RPCSubject(tenant, events.EndpointContext)
	for round := range 2 {
		for _, s := range []string{"s1", "s2"} {
			req, _ := json.Marshal(events.ContextRequest{UserID: "u1", SessionID: s, Lightweight: true})
			b.Run(fmt.Sprintf("%s_round%d", s, round), func(b *testing.B) { requestLatency(b, r.nc, subject, req) })
		}
	}
}

// requestLatency sends req to subject b.N times and reports the p50 and p99
// latency.
func requestLatency(b *testing.B, nc *nats.Conn, subject string, req []byte) {
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		msg, err := nc.Request(subject, req, 10*time.Second)
		if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
			b.Fatalf("request: %v %v", err, msg)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
