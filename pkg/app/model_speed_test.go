package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// modelRig is the whole stack (app.Up) with its chat model and embedder on
// llmtest.Model, answering after latency.
type modelRig struct {
	rig
	model *llmtest.Model
}

func upModelStack(t *testing.T, latency, timeout time.Duration) modelRig {
	t.Helper()
	m := llmtest.NewModel(t)
	m.SetLatency(latency, 0)
	r := upStackWith(t,
		"AGENTMEM_LLM_BASE_URL="+m.URL(),
		"AGENTMEM_LLM_MODEL=fake",
		"AGENTMEM_LLM_TIMEOUT="+timeout.String(),
		"AGENTMEM_EMBED_PROVIDER=openai",
		"AGENTMEM_EMBED_BASE_URL="+m.URL(),
		"AGENTMEM_EMBED_MODEL=fake-embedding",
		"AGENTMEM_EMBED_DIMENSIONS=64",
	)
	return modelRig{rig: r, model: m}
}

func (r modelRig) episodes(t *testing.T, user string) int {
	t.Helper()
	f := vectorstore.Filter{Tenant: "acme", UserID: user, MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}
	n := 0
	for offset := ""; ; {
		page, next, err := r.stack.Runtime().Vectors.Scroll(context.Background(), f, offset, 256)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page)
		if next == "" {
			return n
		}
		offset = next
	}
}

func (r modelRig) deadLetters(t *testing.T) int {
	t.Helper()
	dls, err := bus.ListDeadLetters(context.Background(), r.stack.Runtime().JS, bus.DefaultDLQStream, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(dls)
}

// calls are the model calls per step, from agentmem_llm_calls_total.
func (r modelRig) calls(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := obs.LLMCallCounts(r.stack.Runtime().Registry)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Issue 22: a burst of observations with a model answering in 2 s is stored in
// full, none dead-lettered: a batch's write decisions run concurrently and its
// deadline derives from the work in flight. Before, 50 observations timed out
// batch after batch and 39 were dead-lettered.
func TestModelBurstIsStoredWithoutDeadLetters(t *testing.T) {
	t.Parallel()
	n, latency := 500, 2*time.Second
	if testing.Short() {
		n = 100
	}
	r := upModelStack(t, latency, time.Minute)
	const users = 10
	start := time.Now()
	for i := range n {
		user := fmt.Sprintf("u%d", i%users)
		if _, err := r.client.Say(context.Background(), user, "s-"+user, events.RoleUser, fmt.Sprintf("I like item %d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	bustest.Eventually(t, 90*time.Second, func() error {
		if d := r.deadLetters(t); d > 0 {
			t.Fatalf("%d dead letters", d)
		}
		stored := 0
		for u := range users {
			stored += r.episodes(t, fmt.Sprintf("u%d", u))
		}
		if stored != n {
			return fmt.Errorf("%d of %d observations stored", stored, n)
		}
		return nil
	})
	took := time.Since(start)
	r.waitIdle(t)
	if d := r.deadLetters(t); d > 0 {
		t.Fatalf("%d dead letters", d)
	}
	calls := r.calls(t)
	if got := r.model.Decisions(); got != n {
		t.Errorf("%d write decisions asked for %d observations, want one each", got, n)
	}
	decide := calls["decide"] + calls["decide_batch"]
	if decide >= float64(n)/2 {
		t.Errorf("%v decide calls for %d observations, want them batched", decide, n)
	}
	t.Logf("%d observations at %s per call stored in %s; model calls per observation %.2f (decide %v), embedding requests %d",
		n, latency, took.Round(100*time.Millisecond), decide/float64(n), decide, r.model.Calls(llmtest.StepEmbed))
}

// Issue 22: a long session with a model answering in 5 s is extracted: its chunks
// are asked concurrently and the write decisions are ingest's, never asked again.
// Before, a 50-message session at 2 s per call took 107 s, and at llm.timeout 5s
// was never extracted.
func TestModelLongSessionIsExtractedReusingIngestDecisions(t *testing.T) {
	t.Parallel()
	n, latency := 100, 5*time.Second
	if testing.Short() {
		latency = 2 * time.Second
	}
	r := upModelStack(t, latency, 2*latency)
	start := time.Now()
	for i := range n {
		r.say(t, "u1", "s1", events.RoleUser, fmt.Sprintf("Remember that item %d is in bin %d.", i, 7*i))
	}
	if _, err := r.client.EndSession(context.Background(), "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	var got int
	bustest.Eventually(t, 90*time.Second, func() error {
		if d := r.deadLetters(t); d > 0 {
			t.Fatalf("%d dead letters", d)
		}
		doc := r.file(t, "u1", docstore.MemoryFile)
		if got = strings.Count(doc, "Remember that item"); got == 0 {
			return fmt.Errorf("MEMORY.md has no entries yet")
		}
		return nil
	})
	took := time.Since(start)
	r.waitIdle(t)
	// MEMORY.md keeps what memory.max_lines allows; the extraction holds them all.
	raw, err := r.stack.Runtime().JS.KeyValue(context.Background(), extract.DefaultStateBucket)
	if err != nil {
		t.Fatal(err)
	}
	// The record is sealed with the user's key (forget erases it).
	kv := kvcas.Sealed(raw, r.stack.Runtime().Keyring, kvcas.OwnerAt(0))
	e, err := kv.Get(context.Background(), "acme.u1.s1")
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(e.Value(), &ex); err != nil {
		t.Fatal(err)
	}
	if len(ex.Entries) != n {
		t.Errorf("the extraction has %d entries, want %d (MEMORY.md shows %d)", len(ex.Entries), n, got)
	}
	if d := r.model.Decisions(); d != n {
		t.Errorf("%d write decisions asked for %d messages, want %d: the extractor must reuse ingest's decisions", d, n, n)
	}
	if e := r.model.Calls(llmtest.StepExtract); e != 3 {
		t.Errorf("%d extract calls, want 3 (chunks of 40)", e)
	}
	if s := r.model.Calls(llmtest.StepSemantic); s != 1 {
		t.Errorf("%d semantic calls, want 1", s)
	}
	calls := r.calls(t)
	total := calls["decide"] + calls["decide_batch"] + calls["extract"] + calls["semantic"]
	t.Logf("%d-message session at %s per call extracted in %s; model calls %v: %.2f per observation, %.0f per session (extractor alone: %.0f)",
		n, latency, took.Round(100*time.Millisecond), calls, total/float64(n), total, calls["extract"]+calls["semantic"])
}
