package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/session"
)

// publishedSummaries is the real JetStream of the rig, remembering each
// summary_due ingest publishes: the stream's duplicate window drops a
// republished id, so what ingest asks to publish is seen here only.
type publishedSummaries struct {
	jetstream.JetStream
	mu  sync.Mutex
	due []events.Envelope
}

func (p *publishedSummaries) PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	var env events.Envelope
	if err := json.Unmarshal(msg.Data, &env); err == nil && env.Type == events.TypeSummaryDue {
		p.mu.Lock()
		p.due = append(p.due, env)
		p.mu.Unlock()
	}
	return p.JetStream.PublishMsgAsync(msg, opts...)
}

// take returns what was published since the last take, as "<crossing> <messages> <tokens>".
func (p *publishedSummaries) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, env := range p.due {
		crossing := env.ID[strings.LastIndex(env.ID, "-")+1:]
		out = append(out, fmt.Sprintf("%s %d %d", crossing, env.SummaryDue.Messages, env.SummaryDue.Tokens))
	}
	p.due = nil
	return out
}

// A session's summary_due is published in the batch that crosses a threshold,
// not in the batches after it that cross none, and not before the first
// crossing; a batch that only redelivers events publishes its session's current
// crossing again (its first delivery may have failed before publishing), and
// nothing while no threshold has been crossed. Each step is checked for the
// message threshold and for the token share.
func TestSummaryDuePublishedOnlyOnACrossing(t *testing.T) {
	say := func(text string) events.Envelope {
		env := events.New(events.TypeObservation, "acme", "u1", "bot", "s1")
		env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
		return env
	}
	many := func(n int, text string) []events.Envelope {
		var out []events.Envelope
		for range n {
			out = append(out, say(text))
		}
		return out
	}
	long := strings.Repeat("word ", 50) // 63 tokens, past half of a 100-token window
	for _, tc := range []struct {
		name    string
		trigger session.SummaryTrigger
		before  []events.Envelope // up to the threshold
		cross   []events.Envelope // past it
		after   []events.Envelope // on, without crossing again
		first   string            // what the crossing publishes
		again   string            // what a redelivery of after publishes
	}{
		{
			// Crossings at 11 and 18 messages.
			name:    "messages",
			trigger: session.SummaryTrigger{MessageThreshold: 10, KeepCount: 4, TokenPercent: 75, ContextWindowTokens: 1 << 20},
			before:  many(10, "a message"), cross: many(1, "a message"), after: many(2, "a message"),
			first: "m1 11 33", again: "m1 13 39",
		},
		{
			// Crossings at 50 and 100 tokens.
			name:    "tokens",
			trigger: session.SummaryTrigger{MessageThreshold: 1000, KeepCount: 4, TokenPercent: 50, ContextWindowTokens: 100},
			before:  many(1, "ok"), cross: []events.Envelope{say(long)}, after: many(2, "ok"),
			first: "t1 2 64", again: "t1 4 66",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &publishedSummaries{}
			_, w := newIngest(t, ingest.Config{Summary: tc.trigger}, func(d *ingest.Deps) {
				rec.JetStream = d.JS
				d.JS = rec
			})
			apply := func(step string, batch []events.Envelope, want ...string) {
				t.Helper()
				for i, err := range w.HandleBatch(context.Background(), batch) {
					if err != nil {
						t.Fatalf("%s: event %d: %v", step, i, err)
					}
				}
				if got := rec.take(); !slices.Equal(got, want) {
					t.Fatalf("%s: summary_due published %q, want %q", step, got, want)
				}
			}
			apply("up to the threshold", tc.before)
			apply("redelivered below the threshold", tc.before)
			apply("past the threshold", tc.cross, tc.first)
			apply("on, without another crossing", tc.after)
			apply("that redelivered", tc.after, tc.again)
		})
	}
}
