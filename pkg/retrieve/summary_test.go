package retrieve

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/lifecycle"
)

// A summarised 30-message session's pack holds the summary, with the range it
// stands for, and exactly the last keep_count messages (SPEC B2).
func TestContextSessionSummary(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	var envs []events.Envelope
	for i := range 30 {
		envs = append(envs, r.observe("u1", "s1", fmt.Sprintf("message %d: the budget is %d euros", i, 100+i), nil))
	}
	ss, err := lifecycle.NewSessionSummaries(lifecycle.SessionSummaryConfig{}, r.sessions, nil, nil, nil)
	must(t, err)
	if out, err := ss.Summarize(context.Background(), tenant, "u1", "s1", ""); err != nil || out != lifecycle.SummaryWritten {
		t.Fatalf("Summarize = %q, %v", out, err)
	}
	pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s1"}))
	if len(pack.RecentEvents) != 4 || pack.RecentEvents[0].EventID != envs[26].ID || pack.RecentEvents[3].EventID != envs[29].ID {
		t.Fatalf("recent events %+v, want the last 4", pack.RecentEvents)
	}
	src := pack.SessionSummarySource
	if !strings.Contains(pack.SessionSummary, "125 euros") || src == nil || src.FirstEventID != envs[0].ID || src.LastEventID != envs[25].ID || src.Messages != 26 || src.By != "rules" {
		t.Fatalf("summary %q from %+v", pack.SessionSummary, src)
	}
	if !strings.Contains(pack.Prompt, "## Session summary") || strings.Contains(pack.Prompt, "message 20:") && !strings.Contains(pack.SessionSummary, "message 20:") {
		t.Fatalf("prompt:\n%s", pack.Prompt)
	}
	// Six more messages and no new summary yet: the pack still holds exactly the
	// last 4; the 2 between the summary and them are digested after it, each part
	// with its range.
	for i := 30; i < 36; i++ {
		envs = append(envs, r.observe("u1", "s1", fmt.Sprintf("message %d: the budget is %d euros", i, 100+i), nil))
	}
	pack = ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s1"}))
	if len(pack.RecentEvents) != 4 || pack.RecentEvents[0].EventID != envs[32].ID {
		t.Fatalf("recent events %+v, want the last 4", pack.RecentEvents)
	}
	src = pack.SessionSummarySource
	want := events.SummarySource{FirstEventID: envs[0].ID, LastEventID: envs[31].ID, Messages: 32, By: events.SummaryByDigest, Parts: []events.SummarySource{
		{FirstEventID: envs[0].ID, LastEventID: envs[25].ID, Messages: 26, By: "rules"},
		{FirstEventID: envs[26].ID, LastEventID: envs[31].ID, Messages: 6, By: events.SummaryByDigest},
	}}
	if src == nil || !reflect.DeepEqual(*src, want) {
		t.Fatalf("source %+v, want %+v", src, want)
	}
	stored, digest, found := strings.Cut(pack.SessionSummary, "\n\n")
	if !found || !strings.Contains(stored, "125 euros") || strings.Contains(stored, "126 euros") || !strings.Contains(digest, "126 euros") || !strings.Contains(digest, "131 euros") || strings.Contains(digest, "132 euros") {
		t.Fatalf("summary %q: want the stored one, then messages 26 to 31", pack.SessionSummary)
	}
	// session.summary gives the same text.
	if sum := ok[events.SessionSummaryReply](t, r.call(events.EndpointSessionSummary, events.SessionRequest{UserID: "u1", SessionID: "s1"})); !strings.HasPrefix(sum.Summary, stored+"\n\n") || !strings.Contains(sum.Summary, "135 euros") {
		t.Fatalf("session.summary %q", sum.Summary)
	}

	// A session past the trigger whose summary the extractor has not written yet
	// (summary_due pending, the model failing) is digested whole but its last 4.
	for i := range 25 {
		r.observe("u1", "s3", fmt.Sprintf("message %d: the deadline is day %d", i, i), nil)
	}
	pack = ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s3"}))
	if src := pack.SessionSummarySource; len(pack.RecentEvents) != 4 || src == nil || src.Messages != 21 || len(src.Parts) != 1 || !strings.Contains(pack.SessionSummary, "day 20") || strings.Contains(pack.SessionSummary, "day 21") {
		t.Fatalf("s3: %d recent events, summary %q from %+v", len(pack.RecentEvents), pack.SessionSummary, src)
	}

	// Another session of the user is untouched.
	r.observe("u1", "s2", "hello", nil)
	if p := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s2"})); p.SessionSummary != "" || len(p.RecentEvents) != 1 {
		t.Fatalf("s2 pack %+v", p)
	}
}
