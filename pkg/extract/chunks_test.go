package extract_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// chunky is an extractor that remembers every message saying "remember", counts
// its calls per chunk (keyed by the chunk's first event id) and fails the first
// call of the chunks in failOnce, as a model that times out midway does.
type chunky struct {
	mu        sync.Mutex
	calls     map[string]int
	succeeded map[string]int
	failOnce  map[string]bool
}

func (c *chunky) Extract(ctx context.Context, conv []extract.Message) ([]extract.Extracted, error) {
	key := conv[0].EventID
	c.mu.Lock()
	c.calls[key]++
	fail := c.failOnce[key]
	delete(c.failOnce, key)
	c.mu.Unlock()
	if fail {
		return nil, errors.New("model timed out")
	}
	var out []extract.Extracted
	for _, m := range conv {
		if strings.Contains(m.Text, "Remember") {
			out = append(out, extract.Extracted{Category: markdown.CategoryGeneral, Content: m.Text})
		}
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	c.mu.Lock()
	c.succeeded[key]++
	c.mu.Unlock()
	return out, nil
}

func (c *chunky) counts() (calls, succeeded map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, succeeded = map[string]int{}, map[string]int{}
	for k, v := range c.calls {
		calls[k] = v
	}
	for k, v := range c.succeeded {
		succeeded[k] = v
	}
	return calls, succeeded
}

// Issue 22: a long session is cut into chunks whose results are kept; when a
// chunk fails midway, the retry asks only the chunks not done yet, and the
// extraction holds every chunk's entries once.
func TestWorkerResumesChunkedExtractionAfterFailure(t *testing.T) {
	r := newRig(t)
	const messages, chunk = 50, 10
	turns := make([]turn, messages)
	for i := range turns {
		turns[i] = turn{role: events.RoleUser, text: fmt.Sprintf("Remember that item %d is in bin %d.", i, 7*i)}
	}
	ids := saveSession(t, r.events, "u1", "s1", turns)
	// The fourth chunk fails on its first call.
	x := &chunky{calls: map[string]int{}, succeeded: map[string]int{}, failOnce: map[string]bool{ids[3*chunk]: true}}
	cfg := fastConfig()
	cfg.ChunkMessages, cfg.ModelConcurrency = chunk, 1
	startWorker(t, cfg, r.deps(x))
	endSession(t, r.events, "u1", "s1", endedAt)

	st := waitStatus(t, r.js, "u1", "s1", "applied")
	if len(st.Entries) != messages {
		t.Fatalf("extraction has %d entries, want %d", len(st.Entries), messages)
	}
	calls, succeeded := x.counts()
	for c := range messages / chunk {
		first := ids[c*chunk]
		if succeeded[first] != 1 {
			t.Errorf("chunk %d answered %d times, want once (a retry must reuse it)", c, succeeded[first])
		}
		want := 1
		if c == 3 {
			want = 2
		}
		if calls[first] != want {
			t.Errorf("chunk %d asked %d times, want %d", c, calls[first], want)
		}
	}
	// The chunk records are gone once the session's extraction is stored.
	kv, err := r.js.KeyValue(context.Background(), stateBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if strings.Contains(k, ".chunk-") {
			t.Errorf("chunk record %s left behind", k)
		}
	}
}

// A session within ChunkMessages is asked once, as a whole, as without chunking.
func TestWorkerAsksShortSessionOnce(t *testing.T) {
	r := newRig(t)
	turns := []turn{{role: events.RoleUser, text: "Remember that invoices are due on the 5th."}, {role: events.RoleAssistant, text: "Noted."}}
	ids := saveSession(t, r.events, "u1", "s1", turns)
	x := &chunky{calls: map[string]int{}, succeeded: map[string]int{}, failOnce: map[string]bool{}}
	cfg := fastConfig()
	cfg.ChunkMessages, cfg.ModelConcurrency = 2, 4
	startWorker(t, cfg, r.deps(x))
	endSession(t, r.events, "u1", "s1", endedAt)
	if st := waitStatus(t, r.js, "u1", "s1", "applied"); len(st.Entries) != 1 {
		t.Fatalf("extraction has %d entries, want 1", len(st.Entries))
	}
	if calls, _ := x.counts(); len(calls) != 1 || calls[ids[0]] != 1 {
		t.Fatalf("calls = %v, want one call for the whole session", calls)
	}
}

// The attempt's deadline grows with the session, and is the Router's alone
// without a model.
func TestAttemptBudgetGrowsWithTheSession(t *testing.T) {
	cfg := extract.WorkerConfig{ChunkMessages: 40, ModelConcurrency: 8, CallTimeout: 5 * time.Second, CallBudget: 27 * time.Second}
	short, long := cfg.AttemptBudget(10), cfg.AttemptBudget(1000)
	if short <= 0 || long <= short {
		t.Fatalf("AttemptBudget(10) = %s, AttemptBudget(1000) = %s: want positive and growing", short, long)
	}
	// 1000 messages: 25 chunks in 4 waves of 8, 1000 decisions in 125, one semantic call.
	if want := time.Duration(4+125+1)*5*time.Second + 27*time.Second + 30*time.Second; long != want {
		t.Errorf("AttemptBudget(1000) = %s, want %s", long, want)
	}
	if b := (extract.WorkerConfig{}).AttemptBudget(1000); b != 0 {
		t.Errorf("offline AttemptBudget = %s, want 0", b)
	}
}
