package consolidate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// SPEC C6, C7, C8: "Remember, I'm a student at Peking University" told in two
// chats three days apart is one memory and one fact after consolidation, and a
// rerun changes nothing.
func TestConsolidateMergesAFactToldInTwoChats(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	a := e.episode(t, user, "c1", base, student)
	b := e.episode(t, user, "c2", base.Add(72*time.Hour), student)
	if sim := consolidate.Similarity(a.Vector, b.Vector); sim < consolidate.DefaultMergeThreshold {
		t.Fatalf("scenario needs close vectors, cosine %v", sim)
	}
	r := e.runner(t, "replica-1", nil)

	reply, err := r.Consolidate(ctx, tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	if want := (events.ConsolidateReply{Merged: 1, SemanticWritten: 1}); reply != want {
		t.Fatalf("reply %+v, want %+v", reply, want)
	}
	eps := e.records(t, user, vectorstore.Episodic)
	if len(eps) != 1 {
		t.Fatalf("%d episodic memories after the merge, want exactly one less than 2", len(eps))
	}
	m := eps[0]
	if want := consolidate.MergedRecord(a, b, m.Text, nil).ID; m.ID != want {
		t.Errorf("merged id %s, want %s", m.ID, want)
	}
	if got := sorted(strs(m.Metadata[records.MetaSourceChatIDs])); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("source_chat_ids %v, want both chats", got)
	}
	if got := sorted(strs(m.Metadata[records.MetaMergedFromIDs])); !slices.Equal(got, sorted([]string{a.ID, b.ID})) {
		t.Errorf("merged_from_ids %v, want %s and %s", got, a.ID, b.ID)
	}
	if !m.TS.Equal(base) || m.ChatID != "c1" || m.Metadata[records.MetaTime] != base.Format(time.RFC3339Nano) {
		t.Errorf("merged time %s chat %s (metadata %v), want the earliest %s in c1", m.TS, m.ChatID, m.Metadata[records.MetaTime], base)
	}
	facts := e.records(t, user, vectorstore.Semantic)
	if len(facts) != 1 || facts[0].Text != fact || facts[0].ChatID != "c1" || !facts[0].TS.Equal(base) {
		t.Fatalf("facts %+v, want one %q first seen in c1 at %s", facts, fact, base)
	}
	if got := strs(facts[0].Metadata[records.MetaSourceEventIDs]); !slices.Equal(got, strs(a.Metadata[records.MetaSourceEventIDs])) {
		t.Errorf("fact provenance %v, want the first episode's %v", got, a.Metadata[records.MetaSourceEventIDs])
	}
	if got := e.ops(t, user, m.ID); !slices.Equal(got, []string{consolidate.OpMerge}) {
		t.Errorf("merged memory history %v", got)
	}
	for _, orig := range []string{a.ID, b.ID} {
		if got := e.ops(t, user, orig); !slices.Equal(got, []string{consolidate.OpMergedInto}) {
			t.Errorf("original %s history %v", orig, got)
		}
	}
	if got := e.ops(t, user, facts[0].ID); !slices.Equal(got, []string{consolidate.OpAdd}) {
		t.Errorf("fact history %v", got)
	}

	before := e.snapshot(t, user)
	again, err := r.Consolidate(ctx, tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	if again != (events.ConsolidateReply{}) {
		t.Errorf("rerun did %+v, want nothing", again)
	}
	if after := e.snapshot(t, user); after != before {
		t.Errorf("rerun changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// Even without the watermark (a fresh state bucket) the fact is not written twice.
	fresh := e.runner(t, "replica-2", func(c *consolidate.RunnerConfig, _ *consolidate.RunnerDeps) { c.StateBucket = "fresh_state" })
	if reply, err := fresh.Consolidate(ctx, tenant, user); err != nil || reply.SemanticWritten != 0 {
		t.Errorf("run without watermark: %+v, %v; want no new fact", reply, err)
	}
	if n := len(e.records(t, user, vectorstore.Semantic)); n != 1 {
		t.Errorf("%d facts, want 1", n)
	}
	if last, err := r.LastRun(ctx, tenant, user); err != nil || last.IsZero() {
		t.Errorf("LastRun %s, %v; want the run's start", last, err)
	}
}

// SPEC D4 and C6: the sweep removes expired items, and similar but distinct
// memories are separated (both rewritten, history on both), converging on rerun.
func TestConsolidateSweepsAndSeparates(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	expired := time.Now().Add(-time.Minute)
	item := vectorstore.Record{ID: vectorstore.DeterministicID("item-test"), Tenant: tenant, UserID: user, MemoryType: vectorstore.Item,
		Text: "temporary", Vector: make([]float32, e.emb.Dimensions()), TS: base, ExpiresAt: expired}
	item.Vector[0] = 1
	if err := e.store.Upsert(ctx, item); err != nil {
		t.Fatal(err)
	}
	// Same chat, ten days apart: close vectors but failing the hard rules (C7).
	a := e.episode(t, user, "c1", base, "I love hiking in the Alps with my sister")
	b := e.episode(t, user, "c1", base.Add(240*time.Hour), "I love hiking in the Alps with my brother")
	if sim := consolidate.Similarity(a.Vector, b.Vector); sim < consolidate.DefaultSeparateThreshold {
		t.Fatalf("scenario needs similar vectors, cosine %v", sim)
	}
	r := e.runner(t, "", nil)
	reply, err := r.Consolidate(ctx, tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	if reply.ExpiredSwept != 1 || reply.Separated != 1 || reply.Merged != 0 {
		t.Fatalf("reply %+v, want 1 swept, 1 separated, 0 merged", reply)
	}
	for _, orig := range []vectorstore.Record{a, b} {
		got := e.get(t, user, orig.ID)
		if got.Text == orig.Text || !got.TS.Equal(orig.TS) || got.ChatID != orig.ChatID {
			t.Errorf("separated %s: text %q (was %q), ts %s, chat %s", orig.ID, got.Text, orig.Text, got.TS, got.ChatID)
		}
		if ops := e.ops(t, user, orig.ID); !slices.Equal(ops, []string{consolidate.OpSeparate}) {
			t.Errorf("history of %s: %v", orig.ID, ops)
		}
	}
	again, err := r.Consolidate(ctx, tenant, user)
	if err != nil || again != (events.ConsolidateReply{}) {
		t.Errorf("rerun %+v, %v; want nothing to do", again, err)
	}
}

// blockingMerger holds the first Merge until released (or its context ends), and
// fails the test if two Merge calls ever overlap.
type blockingMerger struct {
	t       *testing.T
	inner   processor.Merger
	active  atomic.Int32
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockingMerger(t *testing.T) *blockingMerger {
	return &blockingMerger{t: t, inner: processor.NewRuleMerger(), entered: make(chan struct{}), release: make(chan struct{})}
}

func (m *blockingMerger) Merge(ctx context.Context, a, b vectorstore.Record) (processor.Rewrite, error) {
	if n := m.active.Add(1); n > 1 {
		m.t.Errorf("%d merges at once on one namespace", n)
	}
	defer m.active.Add(-1)
	first := false
	m.once.Do(func() { first = true; close(m.entered) })
	if first {
		select {
		case <-m.release:
		case <-ctx.Done():
			return processor.Rewrite{}, context.Cause(ctx)
		}
	}
	return m.inner.Merge(ctx, a, b)
}

// Two replicas: while one runs, the other gets ErrLeaseHeld (for runs and hits),
// even for longer than the lease TTL (the holder renews), and the final state is
// that of one run.
func TestTwoReplicasNeverRunAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	a := e.episode(t, user, "c1", base, student)
	b := e.episode(t, user, "c2", base.Add(72*time.Hour), student)
	const ttl = 400 * time.Millisecond
	merger := newBlockingMerger(t)
	r1 := e.runner(t, "replica-1", func(c *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { c.LeaseTTL = ttl; d.Merger = merger })
	r2 := e.runner(t, "replica-2", func(c *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { c.LeaseTTL = ttl; d.Merger = merger })

	type result struct {
		reply events.ConsolidateReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := r1.Consolidate(ctx, tenant, user)
		done <- result{reply, err}
	}()
	<-merger.entered
	held := time.Now()
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for ; time.Since(held) < 3*ttl; <-pace.C {
		if _, err := r2.Consolidate(ctx, tenant, user); !errors.Is(err, consolidate.ErrLeaseHeld) {
			t.Fatalf("second replica during a run: %v, want ErrLeaseHeld", err)
		}
		if err := r2.ApplyHits(ctx, tenant, user, hitEvent(user, "q", a.ID)); !errors.Is(err, consolidate.ErrLeaseHeld) {
			t.Fatalf("hit during a run: %v, want ErrLeaseHeld", err)
		}
	}
	close(merger.release)
	res := <-done
	if res.err != nil || res.reply.Merged != 1 {
		t.Fatalf("first replica: %+v, %v", res.reply, res.err)
	}
	reply, err := r2.Consolidate(ctx, tenant, user)
	if err != nil || reply != (events.ConsolidateReply{}) {
		t.Errorf("second replica after the first: %+v, %v; want nothing left to do", reply, err)
	}
	eps := e.records(t, user, vectorstore.Episodic)
	if len(eps) != 1 || eps[0].ID != consolidate.MergedRecord(a, b, eps[0].Text, nil).ID {
		t.Errorf("episodes %+v, want the one merged record", eps)
	}
	if n := len(e.records(t, user, vectorstore.Semantic)); n != 1 {
		t.Errorf("%d facts, want 1", n)
	}
}

// countingMerger fails the test when two merges overlap and counts them.
type countingMerger struct {
	t      *testing.T
	inner  processor.Merger
	active atomic.Int32
	calls  atomic.Int32
}

func (m *countingMerger) Merge(ctx context.Context, a, b vectorstore.Record) (processor.Rewrite, error) {
	if n := m.active.Add(1); n > 1 {
		m.t.Errorf("%d merges at once on one namespace", n)
	}
	defer m.active.Add(-1)
	m.calls.Add(1)
	return m.inner.Merge(ctx, a, b)
}

// Many concurrent calls from two replicas: every pair is merged exactly once in
// total, which could not hold if two runs had planned on the same state.
func TestConcurrentRunsMergeEachPairOnce(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	texts := []string{
		student,
		"Remember, my cat is called Miso and she is three years old",
		"Remember, I live in Berlin near the Tempelhof field",
		"Remember, my favourite editor is Emacs with evil mode",
	}
	var want []string
	for i, text := range texts {
		a := e.episode(t, user, "c1", base.Add(time.Duration(i)*time.Hour), text)
		b := e.episode(t, user, "c2", base.Add(time.Duration(i)*time.Hour+48*time.Hour), text)
		want = append(want, consolidate.MergedRecord(a, b, "", nil).ID)
	}
	merger := &countingMerger{t: t, inner: processor.NewRuleMerger()}
	replicas := []*consolidate.Runner{
		e.runner(t, "replica-1", func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { d.Merger = merger }),
		e.runner(t, "replica-2", func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { d.Merger = merger }),
	}
	var (
		wg     sync.WaitGroup
		merged atomic.Int32
		facts  atomic.Int32
	)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(5 * time.Millisecond)
			defer pace.Stop()
			for ; ; <-pace.C {
				reply, err := replicas[i%2].Consolidate(ctx, tenant, user)
				if errors.Is(err, consolidate.ErrLeaseHeld) {
					continue
				}
				if err != nil {
					t.Error(err)
				}
				merged.Add(int32(reply.Merged))
				facts.Add(int32(reply.SemanticWritten))
				return
			}
		}()
	}
	wg.Wait()
	if merged.Load() != int32(len(texts)) || merger.calls.Load() != int32(len(texts)) {
		t.Errorf("%d merges reported, %d merger calls; want %d each", merged.Load(), merger.calls.Load(), len(texts))
	}
	var got []string
	for _, r := range e.records(t, user, vectorstore.Episodic) {
		got = append(got, r.ID)
	}
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("episodes %v, want the merged records %v", got, want)
	}
	if n := len(e.records(t, user, vectorstore.Semantic)); int32(n) != facts.Load() || n == 0 {
		t.Errorf("%d facts stored, %d reported", n, facts.Load())
	}
}

// A lease left by a crashed owner blocks runs until it ages out after the TTL;
// then the namespace is taken over.
func TestCrashedOwnersLeaseIsTakenOverAfterTTL(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.episode(t, user, "c1", base, student)
	e.episode(t, user, "c2", base.Add(time.Hour), student)
	const ttl = 500 * time.Millisecond
	r := e.runner(t, "survivor", func(c *consolidate.RunnerConfig, _ *consolidate.RunnerDeps) { c.LeaseTTL = ttl })

	kv, err := e.js.KeyValue(ctx, consolidate.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, tenant+"."+user, []byte(`{"owner":"crashed"}`)); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	_, err = r.Consolidate(ctx, tenant, user)
	if !errors.Is(err, consolidate.ErrLeaseHeld) {
		t.Fatalf("run against a fresh crashed lease: %v, want ErrLeaseHeld", err)
	}
	var reply events.ConsolidateReply
	deadline := time.Now().Add(wait)
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for ; ; <-pace.C {
		reply, err = r.Consolidate(ctx, tenant, user)
		if !errors.Is(err, consolidate.ErrLeaseHeld) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of the crashed owner never expired: %v", err)
		}
	}
	if err != nil || reply.Merged != 1 {
		t.Fatalf("run after takeover: %+v, %v", reply, err)
	}
	// JetStream ages messages out on a timer; allow it a little early slack only.
	if took := time.Since(crashed); took < ttl*3/4 {
		t.Errorf("lease taken over after %s, before its TTL %s", took, ttl)
	}
	if _, err := kv.Get(ctx, tenant+"."+user); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("lease after the run: %v, want released", err)
	}
}

// A holder whose lease is taken from it stops with ErrLeaseLost, and counts it
// in agentmem_leases_lost_total (the alert "a replica missing its lease").
func TestRunStopsWhenItsLeaseIsLost(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.episode(t, user, "c1", base, student)
	e.episode(t, user, "c2", base.Add(time.Hour), student)
	merger := newBlockingMerger(t)
	reg := prometheus.NewRegistry()
	r := e.runner(t, "victim", func(c *consolidate.RunnerConfig, d *consolidate.RunnerDeps) {
		c.LeaseTTL = 600 * time.Millisecond
		d.Merger, d.Metrics = merger, reg
	})
	if n := counterValue(t, reg, "agentmem_leases_lost_total", "", ""); n != 0 {
		t.Fatalf("%v leases lost before any run", n)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.Consolidate(ctx, tenant, user)
		errc <- err
	}()
	<-merger.entered
	kv, err := e.js.KeyValue(ctx, consolidate.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, tenant+"."+user); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, tenant+"."+user, []byte(`{"owner":"usurper"}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, consolidate.ErrLeaseLost) {
		t.Fatalf("run after losing its lease: %v, want ErrLeaseLost", err)
	}
	if n := counterValue(t, reg, "agentmem_leases_lost_total", "", ""); n != 1 {
		t.Errorf("agentmem_leases_lost_total %v, want 1", n)
	}
	if n := len(e.records(t, user, vectorstore.Episodic)); n != 2 {
		t.Errorf("%d episodes; the stopped run must not have merged", n)
	}
	if e, err := kv.Get(ctx, tenant+"."+user); err != nil || string(e.Value()) != `{"owner":"usurper"}` {
		t.Errorf("the new holder's lease was touched: %v", err)
	}
}

func TestRunnerConfigValidate(t *testing.T) {
	e := newEnv(t)
	for name, edit := range map[string]func(*consolidate.RunnerConfig, *consolidate.RunnerDeps){
		"short TTL":  func(c *consolidate.RunnerConfig, _ *consolidate.RunnerDeps) { c.LeaseTTL = time.Millisecond },
		"bad bucket": func(c *consolidate.RunnerConfig, _ *consolidate.RunnerDeps) { c.LeaseBucket = "a.b" },
		"same buckets": func(c *consolidate.RunnerConfig, _ *consolidate.RunnerDeps) {
			c.StateBucket = consolidate.DefaultLeaseBucket
		},
		"inverted cosines": func(c *consolidate.RunnerConfig, _ *consolidate.RunnerDeps) { c.Thresholds.Merge = 0.5 },
		"no sweeper":       func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { d.Sweeper = nil },
		"no history":       func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { d.History = nil },
	} {
		cfg := consolidate.RunnerConfig{}
		deps := consolidate.RunnerDeps{JS: e.js, Vectors: e.store, Embedder: e.emb, History: e.mem.Log(), Sweeper: e.mem}
		edit(&cfg, &deps)
		if _, err := consolidate.NewRunner(testCtx(t), cfg, deps, nil); !errors.Is(err, consolidate.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	r := e.runner(t, "", nil)
	if _, err := r.Consolidate(testCtx(t), "acme", "bad.user"); !errors.Is(err, consolidate.ErrInvalidInput) {
		t.Errorf("bad user id: %v, want ErrInvalidInput", err)
	}
}
