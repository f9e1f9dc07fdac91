package backup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/backup"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/diff"
	"github.com/agentmem/agentmem/pkg/eventstore"
)

const tenant = "acme"

// facts are distinct statements, each its own memory.
var facts = []string{
	"I live in Lisbon and work as a marine biologist",
	"My daughter Ana plays the cello every Tuesday",
	"We deploy the billing service with Terraform on AWS",
	"I am allergic to peanuts and shellfish",
	"Our team uses PostgreSQL 16 for the orders database",
	"I prefer dark roast coffee without sugar",
}

// TestBackupRestoreWhileIngesting backs up a stack that has memory while a
// publisher keeps sending observations, restores the backup into an empty data
// directory, runs a stack on it and compares: the users written before the
// backup have the same files, memories and search results; of the user
// written during it, the restored stack has exactly the memories of the events
// its stream holds, each once.
func TestBackupRestoreWhileIngesting(t *testing.T) {
	stack, _ := apptest.Up(t)
	cl := apptest.Client(t, stack, tenant)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	for u, user := range []string{"u1", "u2"} {
		for i, f := range facts {
			if _, err := cl.Observe(ctx, user, fmt.Sprintf("s%d", i%2), events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("%s (%s %d)", f, user, u)}); err != nil {
				t.Fatal(err)
			}
		}
		for s := range 2 {
			if _, err := cl.EndSession(ctx, user, fmt.Sprintf("s%d", s)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cl.Append(ctx, events.AppendRequest{UserID: user, Content: "Remember: the release train leaves on Thursdays for " + user}); err != nil {
			t.Fatal(err)
		}
	}
	apptest.WaitIdle(t, stack)

	// u3 is written all through the backup, one session per observation.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var published int
	wg.Go(func() {
		// Paced, so that the stacks keep up: the point is traffic during the
		// backup, not a backlog.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				published = i
				return
			case <-tick.C:
			}
			if i == maxLive {
				// Bounded, so that a slow machine (-race, shared cores) catches up.
				<-stop
				published = i
				return
			}
			text := fmt.Sprintf("%s, note %d", facts[i%len(facts)], i)
			if _, err := cl.Observe(ctx, "u3", fmt.Sprintf("live%d", i), events.Observation{Role: events.RoleUser, Text: text}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	waitPublished(t, stack, 30)

	nc, err := nats.Connect(stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dir := filepath.Join(t.TempDir(), "backup")
	m, err := backup.Backup(ctx, nc, dir, backup.Options{Agentmem: "test"})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("u3 observations published: %d; cut at %d, consumers %v", published, m.Cut.Sequence, m.Cut.Consumers)
	waitIdle(ctx, t, stack)
	rtA := stack.Runtime()

	dataDir := t.TempDir()
	cfgB, err := config.Load("", []string{"AGENTMEM_DATA_DIR=" + dataDir, "AGENTMEM_HTTP_LISTEN=", "AGENTMEM_NATS_EMBEDDED_LISTEN=127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Restore(ctx, dir, backup.Target{NATSStoreDir: cfgB.NATS.Embedded.StoreDir, VectorPath: cfgB.Vector.Path, MarkdownDir: cfgB.Memory.Dir}); err != nil {
		t.Fatal(err)
	}
	stackB, err := app.Up(ctx, cfgB, app.UpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stackB.Close() }()
	waitIdle(ctx, t, stackB)
	rtB := stackB.Runtime()

	for _, user := range []string{"u1", "u2"} {
		a, err := diff.Take(ctx, rtA.Docs, rtA.Vectors, tenant, user)
		if err != nil {
			t.Fatal(err)
		}
		b, err := diff.Take(ctx, rtB.Docs, rtB.Vectors, tenant, user)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Memories) < len(facts) || a.Files["MEMORY.md"] == "" {
			t.Fatalf("%s: the source has %d memories and MEMORY.md %q: the test wrote too little", user, len(a.Memories), a.Files["MEMORY.md"])
		}
		if r := diff.Compare("source", a, "restored", b); !r.Empty() {
			var sb strings.Builder
			_ = r.Write(&sb)
			t.Errorf("%s differs after the restore:\n%s", user, sb.String())
		}
		clB := apptest.Client(t, stackB, tenant)
		for _, q := range []string{"cello", "database", "release train"} {
			ra, err := cl.Search(ctx, events.SearchRequest{UserID: user, Query: q})
			if err != nil {
				t.Fatal(err)
			}
			rb, err := clB.Search(ctx, events.SearchRequest{UserID: user, Query: q})
			if err != nil {
				t.Fatal(err)
			}
			if ids(ra) == "" || ids(ra) != ids(rb) {
				t.Errorf("%s: search %q: source %s, restored %s", user, q, ids(ra), ids(rb))
			}
		}
	}

	// u3: the memories of exactly the events in the restored stream, each once.
	lastB := m.Streams[slices.IndexFunc(m.Streams, func(s backup.StreamEntry) bool { return s.Name == m.Cut.Stream })].State.LastSeq
	t.Logf("the restored stream ends at %d; ingest had acknowledged up to %d at the cut", lastB, m.Cut.Consumers["agentmem-ingest"])
	inB := eventIDs(ctx, t, rtB.Events, "u3", lastB)
	if len(inB) == 0 {
		t.Fatal("no u3 event in the backup")
	}
	a, err := diff.Take(ctx, rtA.Docs, rtA.Vectors, tenant, "u3")
	if err != nil {
		t.Fatal(err)
	}
	b, err := diff.Take(ctx, rtB.Docs, rtB.Vectors, tenant, "u3")
	if err != nil {
		t.Fatal(err)
	}
	want := bySource(t, a.Memories, inB)
	got := bySource(t, b.Memories, nil)
	if len(want) == 0 || len(want) != len(got) {
		t.Fatalf("u3: the source has %d memories of the %d events in the backup, the restored stack %d", len(want), len(inB), len(got))
	}
	for src, mem := range want {
		if g, ok := got[src]; !ok || g.ID != mem.ID || g.Text != mem.Text {
			t.Errorf("u3: memory of event %s: source %+v, restored %+v", src, mem, g)
		}
	}
}

// maxLive bounds the observations published while the backup runs.
const maxLive = 300

// waitIdle waits until the stack has handled everything published, longer
// than apptest.WaitIdle: under -race the backlog the publisher leaves takes a
// while.
func waitIdle(ctx context.Context, t *testing.T, stack *app.Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// waitPublished waits until the stream holds n observations of u3.
func waitPublished(t *testing.T, stack *app.Stack, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if len(eventIDs(context.Background(), t, stack.Runtime().Events, "u3", 0)) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d u3 events published in 30s", n)
}

// eventIDs are the ids of user's observations in the stream up to sequence
// last (0: all).
func eventIDs(ctx context.Context, t *testing.T, store *eventstore.Store, user string, last uint64) map[string]bool {
	t.Helper()
	res, err := store.List(ctx, eventstore.Query{Tenant: tenant, User: user}, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range res {
		if e.Envelope.Type == events.TypeObservation && (last == 0 || e.Seq <= last) {
			out[e.Envelope.ID] = true
		}
	}
	return out
}

// bySource maps the memories of one source event each by that event, keeping
// those of the events in keep (nil: all); a second memory of one event fails.
func bySource(t *testing.T, mems []diff.Memory, keep map[string]bool) map[string]diff.Memory {
	t.Helper()
	out := map[string]diff.Memory{}
	for _, m := range mems {
		if len(m.SourceEventIDs) != 1 {
			t.Fatalf("memory %s has sources %v, want one", m.ID, m.SourceEventIDs)
		}
		src := m.SourceEventIDs[0]
		if keep != nil && !keep[src] {
			continue
		}
		if prev, dup := out[src]; dup {
			t.Fatalf("event %s applied twice: %s and %s", src, prev.ID, m.ID)
		}
		out[src] = m
	}
	return out
}

func ids(r events.SearchReply) string {
	s := ""
	for _, x := range r.Results {
		s += x.ID + " "
	}
	return s
}
