package retrieve

import (
	"context"
	"fmt"
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
	if out, err := ss.Summarize(context.Background(), tenant, "u1", "s1"); err != nil || out != lifecycle.SummaryWritten {
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
	// Another session of the user is untouched.
	r.observe("u1", "s2", "hello", nil)
	if p := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s2"})); p.SessionSummary != "" || len(p.RecentEvents) != 1 {
		t.Fatalf("s2 pack %+v", p)
	}
}
