package ingest_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/priority"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
)

// readDuringDecisions is the rule decider, starting a read of the gate at its
// first decision and noting, per decided text, whether the batch's context had
// ended by then.
type readDuringDecisions struct {
	processor.WriteDecider
	gate *priority.Gate

	mu      sync.Mutex
	release func()
	ended   map[string]bool
}

func (d *readDuringDecisions) Decide(ctx context.Context, obs records.Observation) (records.Episode, error) {
	d.mu.Lock()
	if d.release == nil {
		d.release = d.gate.Foreground()
	}
	d.ended[obs.Text] = ctx.Err() != nil
	d.mu.Unlock()
	return d.WriteDecider.Decide(ctx, obs)
}

// Deciding one after another (DecideConcurrency 1), a batch yields to reads
// every eight decisions, not after each one and not only before the first: a
// read that starts during the first decision holds back the ninth until the
// batch's context ends (the gate's longest wait is an hour here), and lets the
// second to the eighth go at once.
func TestSequentialDecisionsYieldToReadsEveryEight(t *testing.T) {
	gate := priority.New(time.Hour)
	d := &readDuringDecisions{WriteDecider: processor.NewRuleDecider(), gate: gate, ended: map[string]bool{}}
	_, w := newIngest(t, ingest.Config{}, func(deps *ingest.Deps) {
		deps.Gate = gate
		deps.Decider = d
	})
	var batch []events.Envelope
	var texts []string
	for i := range 10 {
		text := fmt.Sprintf("Remember: locker %d is on floor %d", i, i)
		batch = append(batch, observation("u1", text))
		texts = append(texts, text)
	}
	// Long enough for eight rule decisions on a loaded machine; the ninth
	// decision waits for it to pass.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.HandleBatch(ctx, batch)
	d.mu.Lock()
	d.release()
	d.mu.Unlock()

	var decided, waited []string
	for _, text := range texts {
		ended, ok := d.ended[text]
		if ok {
			decided = append(decided, text)
		}
		if ended {
			waited = append(waited, text)
		}
	}
	if !slices.Equal(decided, texts) {
		t.Fatalf("decided %q, want every message", decided)
	}
	if !slices.Equal(waited, texts[8:]) {
		t.Fatalf("decided after the batch's context ended: %q; want the ninth and tenth, held back by the read", waited)
	}
}
