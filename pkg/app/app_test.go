package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/markdown"
)

type rig struct {
	stack  *app.Stack
	cfg    config.Config
	client *client.Client
}

// upStack runs the all-in-one stack (SPEC E8) on a temporary data directory with a
// TCP listener on a free loopback port, so outside clients can connect too.
func upStack(t *testing.T) rig { return upStackWith(t) }

// upStackWith is upStack with more configuration (AGENTMEM_* variables).
func upStackWith(t *testing.T, environ ...string) rig {
	t.Helper()
	return upStackLogged(t, nil, environ...)
}

// upStackLogged is upStackWith with the stack logging to logger.
func upStackLogged(t *testing.T, logger *zap.Logger, environ ...string) rig {
	t.Helper()
	stack, cfg := apptest.UpLogged(t, logger, environ...)
	nc, err := nats.Connect(stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Config{Tenant: "acme", AgentID: "excel-bot"})
	if err != nil {
		t.Fatal(err)
	}
	return rig{stack: stack, cfg: cfg, client: cl}
}

func (r rig) waitIdle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.WaitIdle(ctx, r.stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func (r rig) say(t *testing.T, user, session string, role events.Role, text string) {
	t.Helper()
	if _, err := r.client.Say(context.Background(), user, session, role, text, nil); err != nil {
		t.Fatal(err)
	}
}

func (r rig) file(t *testing.T, user, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.cfg.Memory.Dir, "acme", user, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(data)
}

func entries(t *testing.T, doc string) []markdown.Entry {
	t.Helper()
	es, perrs := markdown.ParseEntries(doc)
	if len(perrs) > 0 {
		t.Fatalf("malformed entries: %v", perrs)
	}
	return es
}

// Issue 3, end to end through a real nats-server: entries land in the right files in
// the exact format; a new session's context pack holds core memory and the relevant
// topic file; a duplicated session_ended writes nothing twice.
func TestSessionBecomesMemoryAndContext(t *testing.T) {
	r := upStack(t)
	ctx := context.Background()
	r.say(t, "u1", "s1", events.RoleUser, "hello there")
	r.say(t, "u1", "s1", events.RoleUser, "My orders.csv has columns order_id, customer, total and about 1200 rows.")
	r.say(t, "u1", "s1", events.RoleUser, "I prefer line charts with a dark theme.")
	r.say(t, "u1", "s1", events.RoleUser, "Remember that invoices are due on the 5th of each month.")
	if _, err := r.client.EndSession(ctx, "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	r.waitIdle(t)

	patterns, prefs, core := r.file(t, "u1", docstore.FilePatternsFile), r.file(t, "u1", docstore.UserPrefsFile), r.file(t, "u1", docstore.MemoryFile)
	fp, up, general := entries(t, patterns), entries(t, prefs), entries(t, core)
	if len(fp) != 1 || fp[0].Category != markdown.CategoryFilePattern || !strings.Contains(fp[0].Content, "order_id") {
		t.Fatalf("file_patterns.md = %q", patterns)
	}
	if len(up) != 1 || up[0].Category != markdown.CategoryUserPref || !strings.Contains(up[0].Content, "line chart") {
		t.Fatalf("user_prefs.md = %q", prefs)
	}
	if len(general) != 1 || !strings.Contains(strings.ToLower(general[0].Content), "invoices") {
		t.Fatalf("MEMORY.md = %q", core)
	}
	// The exact A6 format, byte for byte, as written by the formatter.
	if patterns != markdown.FormatEntries(fp) {
		t.Fatalf("file_patterns.md is not in the entry format:\n%s", patterns)
	}

	pack, err := r.client.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s2", Query: "which columns does my orders file have?"})
	if err != nil {
		t.Fatal(err)
	}
	if pack.Core == nil || !strings.Contains(strings.ToLower(pack.Core.Text), "invoices") {
		t.Fatalf("context pack has no core memory: %+v", pack.Core)
	}
	var topics []string
	for _, it := range pack.Topics {
		topics = append(topics, it.Source.File)
	}
	if len(topics) != 1 || topics[0] != docstore.FilePatternsFile || !strings.Contains(pack.Prompt, "order_id") {
		t.Fatalf("topics = %v (want only %s), prompt:\n%s", topics, docstore.FilePatternsFile, pack.Prompt)
	}

	// session_ended delivered again (a new event for the same session): nothing new.
	if _, err := r.client.EndSession(ctx, "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	r.waitIdle(t)
	if again := r.file(t, "u1", docstore.FilePatternsFile) + r.file(t, "u1", docstore.UserPrefsFile) + r.file(t, "u1", docstore.MemoryFile); again != patterns+prefs+core {
		t.Fatalf("a second session_ended changed the memory:\n%s", again)
	}
}

// An invalid event lands in the dead-letter stream with its reason while the valid
// events around it are processed.
func TestInvalidEventIsDeadLetteredAndOthersGoOn(t *testing.T) {
	r := upStack(t)
	ctx := context.Background()
	js := r.stack.Runtime().JS
	bad := events.New(events.TypeObservation, "acme", "u1", "bot", "s1")
	bad.Observation = &events.Observation{Role: "robot", Text: "beep"}
	data, _ := json.Marshal(bad)
	if _, err := js.Publish(ctx, "mem.acme.obs.u1.s1", data); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "mem.acme.obs.u1.s1", []byte(`{"schema_version":7}`)); err != nil {
		t.Fatal(err)
	}
	r.say(t, "u1", "s1", events.RoleUser, "still here")
	r.waitIdle(t)

	dls, err := bus.ListDeadLetters(ctx, js, bus.DefaultDLQStream, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 2 {
		t.Fatalf("dead letters = %+v, want 2", dls)
	}
	for _, dl := range dls {
		if dl.Worker != bus.WorkerIngest || dl.Subject != "mem.acme.obs.u1.s1" || dl.Reason == "" {
			t.Fatalf("dead letter = %+v", dl)
		}
	}
	// Ingest handles several messages at once, so the dead letters come in any order.
	reasons := dls[0].Reason + "\n" + dls[1].Reason
	if !strings.Contains(reasons, `observation.role is "robot"`) || !strings.Contains(reasons, "schema_version is 7") {
		t.Fatalf("reasons do not say what is wrong:\n%s", reasons)
	}
	st, err := r.stack.Runtime().Sessions.Get(ctx, "acme", "u1", "s1")
	if err != nil || st.Messages != 1 {
		t.Fatalf("session state = %+v, %v; want the one valid message", st, err)
	}
}

// A client that is not this project's code (Node.js, the official nats package)
// speaks the documented contract against the stack. CI installs node and the
// example's packages and sets AGENTMEM_TEST_NODE=1, which makes a missing node fatal.
func TestNodeClientSpeaksTheContract(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "examples", "node"))
	required := os.Getenv("AGENTMEM_TEST_NODE") == "1"
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "nats"))
	if err != nil || modErr != nil {
		msg := fmt.Sprintf("NODE CONTRACT TEST SKIPPED: node=%v, examples/node/node_modules/nats=%v; run `npm ci` in examples/node", err, modErr)
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	r := upStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "contract.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NATS_URL="+r.stack.ClientURL())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node contract.mjs: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "OK ") {
		t.Fatalf("node script did not report OK:\n%s", out.String())
	}
}
