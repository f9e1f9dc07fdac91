package memory_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// t0 is the fixtures' starting time, away from the wall clock on purpose: the
// service must judge age and expiry by Deps.Now alone.
var t0 = time.Date(2031, 5, 4, 10, 0, 0, 0, time.UTC)

// clock is a settable Deps.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	svc   *memory.Service
	store *embedded.Store
	emb   embed.Embedder
	clock *clock
}

// newFixture wires a Service to a real embedded NATS server, a real embedded
// vector store in a temporary directory and the local embedder.
func newFixture(t testing.TB, cfg memory.Config) *fixture {
	t.Helper()
	emb, err := embed.NewLocal(embed.LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, cfg, emb)
}

// newFixtureWith is newFixture with the embedder emb.
func newFixtureWith(t testing.TB, cfg memory.Config, emb embed.Embedder) *fixture {
	t.Helper()
	_, _, js := bustest.Provisioned(t)
	store, err := embedded.New(embedded.Config{
		Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: emb.Dimensions(),
	}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := &clock{t: t0}
	svc, err := memory.New(context.Background(), cfg, memory.Deps{Vectors: store, Embedder: emb, JS: js, Now: clk.Now}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{svc: svc, store: store, emb: emb, clock: clk}
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// count is how many records of the user the store holds, expired or not.
func (f *fixture) count(t fataler, tenant, user string, types ...vectorstore.MemoryType) int {
	t.Helper()
	n, err := f.store.Count(context.Background(), vectorstore.Filter{Tenant: tenant, UserID: user, MemoryTypes: types, IncludeExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantErr fails unless err wraps every sentinel and mentions every word.
func wantErr(t testing.TB, err error, sentinels []error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", sentinels)
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			t.Errorf("error %q does not wrap %v", err, s)
		}
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
