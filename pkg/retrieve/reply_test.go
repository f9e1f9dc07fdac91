package retrieve

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/obs"
)

// Without authentication too, the retriever serves a request only when its reply
// subject is an inbox (issue 30): a reply aimed at another tenant's forget, its
// stream or nowhere is never published, the request is not served (acme's
// memory is still there), each refusal is counted and a tenant's refusals are
// logged once; a request on the default inbox is answered.
func TestRequestsWithAForeignReplySubjectAreNotServed(t *testing.T) {
	r := newRig(t)
	reg := prometheus.NewRegistry()
	metrics, err := obs.NewRPCMetrics(reg)
	must(t, err)
	deps := r.deps()
	deps.Metrics = metrics
	core, logs := observer.New(zapcore.WarnLevel)
	r.startLogged(Config{}, deps, zap.New(core))

	added := ok[events.AddReply](t, r.call(events.EndpointAdd, events.AddRequest{UserID: "u1", Text: "Sales files have columns date, product and qty.", MemoryType: events.MemorySemantic}))
	if len(added.MemoryIDs) != 1 {
		t.Fatalf("add: %+v", added)
	}
	targets, err := r.nc.SubscribeSync("memrpc.globex.>")
	must(t, err)
	stream, err := r.nc.SubscribeSync("mem.globex.>")
	must(t, err)
	must(t, r.nc.Flush())

	refused := []struct{ subject, reply string }{
		{"memrpc.acme.context", "memrpc.globex.forget"},
		{"memrpc.acme.search", "mem.globex.obs.u1.s1"},
		{"memrpc.acme.reset", ""},
		{"memrpc.acme.forget", "_INBOX_globex_UABC.1"},
		{"memrpc.other.context", "memrpc.globex.reset"},
	}
	for _, req := range refused {
		must(t, r.nc.PublishMsg(&nats.Msg{Subject: req.subject, Reply: req.reply, Data: []byte(`{"user_id":"u1","query":"sales"}`)}))
	}
	total := func() float64 {
		families, err := reg.Gather()
		must(t, err)
		var n float64
		for _, f := range families {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); total() != float64(len(refused)); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("refused %v requests, want %d", total(), len(refused))
		}
	}
	if m, err := targets.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("a reply reached %s", m.Subject)
	}
	if m, err := stream.NextMsg(time.Millisecond); err == nil {
		t.Fatalf("a reply reached %s", m.Subject)
	}
	// Not served: the reset and the forget did nothing.
	got := ok[events.Memory](t, r.call(events.EndpointGet, events.GetRequest{UserID: "u1", ID: added.MemoryIDs[0]}))
	if got.ID != added.MemoryIDs[0] {
		t.Fatalf("acme's memory after the refused requests: %+v", got)
	}
	var tenants []string
	for _, e := range logs.FilterMessageSnippet("refused a request").All() {
		tenants = append(tenants, e.ContextMap()["tenant"].(string))
	}
	if len(tenants) != 2 || tenants[0] != "acme" || tenants[1] != "other" {
		t.Fatalf("logged the refusals of %v, want acme's once and other's once", tenants)
	}
}
