package replay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/diff"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/replay"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const tenant = "acme"

// live is a running stack with some history.
type live struct {
	stack *app.Stack
	rt    *app.Runtime
	root  string
}

func newLive(t *testing.T, ctx context.Context) *live {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Load("", config.WithOverrides(nil, config.Sandbox(dir)))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := app.Up(ctx, cfg, app.UpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	return &live{stack: stack, rt: stack.Runtime(), root: filepath.Join(dir, "replays")}
}

// session publishes a conversation and ends it.
func (l *live) session(t *testing.T, ctx context.Context, user, session string, texts ...string) {
	t.Helper()
	cl, err := client.New(l.rt.Conn, client.Config{Tenant: tenant, AgentID: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		role := events.RoleUser
		if i%2 == 1 {
			role = events.RoleAssistant
		}
		if _, err := cl.Say(ctx, user, session, role, text, map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.EndSession(ctx, user, session); err != nil {
		t.Fatal(err)
	}
	if err := app.WaitIdle(ctx, l.rt.JS, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// state is what must not change in the live namespace: its snapshot and the
// stream's message count.
func (l *live) state(t *testing.T, ctx context.Context, user string) (diff.Snapshot, uint64) {
	t.Helper()
	snap, err := diff.Take(ctx, l.rt.Docs, l.rt.Vectors, tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.rt.JS.Stream(ctx, "AGENTMEM")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap, info.State.Msgs
}

func (l *live) unchanged(t *testing.T, ctx context.Context, user string, snap diff.Snapshot, msgs uint64, when string) {
	t.Helper()
	now, n := l.state(t, ctx, user)
	if r := diff.Compare("before", snap, "after", now); !r.Empty() || n != msgs {
		var b strings.Builder
		_ = r.Write(&b)
		t.Fatalf("%s: the live namespace changed (stream %d → %d messages):\n%s", when, msgs, n, b.String())
	}
}

// shadow is the snapshot of a replay.
func shadow(t *testing.T, ctx context.Context, root, name, user string, environ []string) diff.Snapshot {
	t.Helper()
	sh, err := replay.Open(ctx, root, tenant, name, "", environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sh.Close() }()
	snap, err := diff.Take(ctx, sh.Runtime.Docs, sh.Runtime.Vectors, tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

var conversation = []string{
	"My sales.csv has columns date, product and qty.",
	"Noted: sales.csv has date, product and qty.",
	"I prefer bar charts for monthly totals.",
	"Understood, bar charts for monthly totals.",
	"Remember that the fiscal year starts in April.",
	"Got it, fiscal year starts in April.",
}

// E6: a replay with the live configuration makes exactly the live memory (an empty
// diff: anything nondeterministic would show), the live namespace and stream are
// untouched by the replay and by its drop, and a replay with another
// ingest.context_messages differs, naming the memories.
func TestReplayMatchesLiveAndLeavesItAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := newLive(t, ctx)
	l.session(t, ctx, "u1", "s1", conversation...)
	l.session(t, ctx, "u1", "s2", "I always export charts as PNG.", "PNG exports, noted.")
	before, msgs := l.state(t, ctx, "u1")
	if len(before.Memories) == 0 || len(before.Files) == 0 {
		t.Fatalf("live memory is empty: %+v", before)
	}

	var progress strings.Builder
	m, err := replay.Run(ctx, replay.Config{Root: l.root, Name: "same", Tenant: tenant, User: "u1", Progress: &progress}, l.rt.Events, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != replay.StatusDone || m.EventsFed == 0 || m.Memories != len(before.Memories) || !strings.Contains(progress.String(), "events read") {
		t.Fatalf("manifest %+v, progress:\n%s", m, progress.String())
	}
	l.unchanged(t, ctx, "u1", before, msgs, "after replay")
	if r := diff.Compare("live", before, "same", shadow(t, ctx, l.root, "same", "u1", nil)); !r.Empty() {
		var b strings.Builder
		_ = r.Write(&b)
		t.Fatalf("replay with the live configuration differs:\n%s", b.String())
	}

	_, err = replay.Run(ctx, replay.Config{Root: l.root, Name: "ctx0", Tenant: tenant, User: "u1",
		Environ: []string{"AGENTMEM_INGEST_CONTEXT_MESSAGES=-1"}}, l.rt.Events, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := diff.Compare("live", before, "ctx0", shadow(t, ctx, l.root, "ctx0", "u1", nil))
	if len(r.Changed) == 0 {
		var b strings.Builder
		_ = r.Write(&b)
		t.Fatalf("context_messages -1 changed no memory:\n%s", b.String())
	}
	var out strings.Builder
	must(t, r.Write(&out))
	if !strings.Contains(out.String(), r.Changed[0].Before.ID) {
		t.Fatalf("diff does not name the changed memory %s:\n%s", r.Changed[0].Before.ID, out.String())
	}

	if _, err := replay.Run(ctx, replay.Config{Root: l.root, Name: "same", Tenant: tenant, User: "u1"}, l.rt.Events, nil); !errors.Is(err, replay.ErrExists) {
		t.Fatalf("a second run of a finished replay: %v, want ErrExists", err)
	}
	list, err := replay.List(l.root, tenant)
	if err != nil || len(list) != 2 || list[0].Name != "ctx0" || list[1].Name != "same" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for _, name := range []string{"same", "ctx0"} {
		must(t, replay.Drop(l.root, tenant, name))
		if _, err := os.Stat(replay.Dir(l.root, tenant, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there after drop: %v", name, err)
		}
	}
	if err := replay.Drop(l.root, tenant, "same"); !errors.Is(err, replay.ErrNotFound) {
		t.Fatalf("dropping a dropped replay: %v", err)
	}
	l.unchanged(t, ctx, "u1", before, msgs, "after drop")
}

// E6: a replay of a time range feeds only the events stored in it, and an
// interrupted replay run again ends where an uninterrupted one does.
func TestReplayRangeAndResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := newLive(t, ctx)
	l.session(t, ctx, "u1", "s1", conversation...)
	stored, err := l.rt.Events.List(ctx, eventstore.Query{Tenant: tenant}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := stored[len(stored)-1].Time.Add(time.Nanosecond)
	l.session(t, ctx, "u1", "s2", "I always export charts as PNG.", "PNG exports, noted.")

	m, err := replay.Run(ctx, replay.Config{Root: l.root, Name: "later", Tenant: tenant, Since: cut}, l.rt.Events, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := shadow(t, ctx, l.root, "later", "u1", nil)
	for _, mem := range snap.Memories {
		for _, id := range mem.SourceEventIDs {
			for _, st := range stored {
				if st.Envelope.ID == id {
					t.Fatalf("memory %s comes from event %s before the range", mem.ID, id)
				}
			}
		}
	}
	if m.EventsFed != 3 || len(snap.Memories) == 0 {
		t.Fatalf("range replay fed %d events (want s2's 2 messages and its end), %d memories", m.EventsFed, len(snap.Memories))
	}
	// The other end: Until the cut feeds s1 only, nothing of s2.
	m, err = replay.Run(ctx, replay.Config{Root: l.root, Name: "earlier", Tenant: tenant, Until: cut}, l.rt.Events, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.EventsFed != len(conversation)+1 {
		t.Fatalf("replay until the cut fed %d events, want s1's %d messages and its end", m.EventsFed, len(conversation))
	}
	for _, mem := range shadow(t, ctx, l.root, "earlier", "u1", nil).Memories {
		for _, id := range mem.SourceEventIDs {
			if !slices.ContainsFunc(stored, func(st eventstore.Stored) bool { return st.Envelope.ID == id }) {
				t.Fatalf("memory %s comes from event %s after the range", mem.ID, id)
			}
		}
	}

	// Interrupted once the events are fed, before the workers are done.
	ictx, stop := context.WithCancel(ctx)
	_, err = replay.Run(ictx, replay.Config{Root: l.root, Name: "resumed", Tenant: tenant, User: "u1", Progress: cancelOn{"waiting", stop}}, l.rt.Events, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted replay: %v", err)
	}
	list, err := replay.List(l.root, tenant)
	must(t, err)
	if status := statusOf(list, "resumed"); status != replay.StatusRunning {
		t.Fatalf("interrupted replay has status %q", status)
	}
	var progress strings.Builder
	m, err = replay.Run(ctx, replay.Config{Root: l.root, Name: "resumed", Tenant: tenant, User: "u1", Progress: &progress}, l.rt.Events, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.EventsFed != 0 || !strings.Contains(progress.String(), "resuming") {
		t.Fatalf("resumed run fed %d events again:\n%s", m.EventsFed, progress.String())
	}
	_, err = replay.Run(ctx, replay.Config{Root: l.root, Name: "whole", Tenant: tenant, User: "u1"}, l.rt.Events, nil)
	must(t, err)
	if r := diff.Compare("whole", shadow(t, ctx, l.root, "whole", "u1", nil), "resumed", shadow(t, ctx, l.root, "resumed", "u1", nil)); !r.Empty() {
		var b strings.Builder
		_ = r.Write(&b)
		t.Fatalf("resumed replay differs from an uninterrupted one:\n%s", b.String())
	}
	n, err := l.rt.Vectors.Count(ctx, vectorstore.Filter{Tenant: tenant, UserID: "u1"})
	must(t, err)
	if n == 0 {
		t.Fatal("live has no memories")
	}
}

type cancelOn struct {
	word string
	stop context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.word) {
		c.stop()
	}
	return len(p), nil
}

var _ io.Writer = cancelOn{}

func statusOf(list []replay.Manifest, name string) string {
	for _, m := range list {
		if m.Name == name {
			return m.Status
		}
	}
	return fmt.Sprintf("(no replay %s)", name)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
