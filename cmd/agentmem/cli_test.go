package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// run executes the agentmem command line in-process.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// upForCLI runs the all-in-one stack on a temporary directory for the commands
// to reach at url, with the AGENTMEM_* settings of env; it is closed when the
// test ends.
func upForCLI(t *testing.T, ctx context.Context, env ...string) (stack *app.Stack, url string) {
	t.Helper()
	return upStackForCLI(t, ctx, t.TempDir(), app.UpOptions{}, env...)
}

// upAuthForCLI is upForCLI with authentication, as `up --auth` runs it; it
// returns the data directory too, for `creds add --data-dir`.
func upAuthForCLI(t *testing.T, ctx context.Context) (stack *app.Stack, url, dataDir string) {
	t.Helper()
	dataDir = t.TempDir()
	a, err := natsauth.New(natsauth.Config{Dir: natsauth.KeyDir(dataDir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stack, url = upStackForCLI(t, ctx, dataDir, app.UpOptions{Auth: a})
	return stack, url, dataDir
}

func upStackForCLI(t *testing.T, ctx context.Context, dataDir string, opts app.UpOptions, env ...string) (stack *app.Stack, url string) {
	t.Helper()
	cfg, err := config.Load("", append([]string{"AGENTMEM_DATA_DIR=" + dataDir, "AGENTMEM_HTTP_LISTEN=", "AGENTMEM_NATS_EMBEDDED_LISTEN=127.0.0.1:0"}, env...))
	if err != nil {
		t.Fatal(err)
	}
	stack, err = app.Up(ctx, cfg, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	t.Setenv("AGENTMEM_CONFIG", "")
	return stack, stack.ClientURL()
}

// The client commands speak the contract to a running stack: a session observed and
// ended from the command line comes back in the context pack, search and topic; an
// invalid event shows up in `dlq list` with its reason.
func TestClientCommandsAgainstARunningStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, url := upForCLI(t, ctx)

	ns := []string{"--nats-url", url, "--tenant", "acme", "--user", "u1"}
	for _, text := range []string{"My sales.csv has columns date, product and qty.", "I prefer bar charts."} {
		if out, err := run(t, append([]string{"observe", "--session", "s1", "--text", text, "--meta", "dia_id=D1:1"}, ns...)...); err != nil {
			t.Fatalf("observe: %v\n%s", err, out)
		}
	}
	if out, err := run(t, append([]string{"end", "--session", "s1"}, ns...)...); err != nil {
		t.Fatalf("end: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"append", "--content", "Quarterly reports go to finance."}, ns...)...); err != nil || !strings.Contains(out, "MEMORY.md") {
		t.Fatalf("append: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	out, err := run(t, append([]string{"context", "--query", "which columns does my sales file have?"}, ns...)...)
	if err != nil || !strings.Contains(out, "qty") || !strings.Contains(out, "finance") {
		t.Fatalf("context: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"topic", "--topic", "user_prefs"}, ns...)...); err != nil || !strings.Contains(out, "bar chart") {
		t.Fatalf("topic: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"topic", "--topic", "../secrets"}, ns...)...); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("topic escape: err %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"search", "--query", "sales columns"}, ns...)...); err != nil || !strings.Contains(out, "result(s)") {
		t.Fatalf("search table: %v\n%s", err, out)
	}
	out, err = run(t, append([]string{"search", "--json", "--query", "sales columns"}, ns...)...)
	var found events.SearchReply
	if err != nil || json.Unmarshal([]byte(out), &found) != nil || len(found.Results) == 0 {
		t.Fatalf("search: %v\n%s", err, out)
	}
	for _, h := range found.Results { // every hit has the id get, update and delete take
		if h.ID == "" {
			t.Errorf("search hit without an id: %+v", h)
		}
	}
	if out, err := run(t, "observe", "--nats-url", url, "--tenant", "acme", "--user", "u.1", "--session", "s1", "--text", "x"); err == nil {
		t.Fatalf("an invalid user id was accepted:\n%s", out)
	}

	if _, err := stack.Runtime().JS.Publish(ctx, "mem.acme.obs.u1.s2", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "dlq", "list", "--nats-url", url)
	if err != nil || !strings.Contains(out, "mem.acme.obs.u1.s2") || !strings.Contains(out, "1 dead letter(s)") {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	if out, err := run(t, "dlq", "replay", "999", "--nats-url", url); err == nil {
		t.Fatalf("replaying an unknown dead letter succeeded:\n%s", out)
	}
}

// stderrOf runs f and returns what was written to os.Stderr meanwhile, where the
// commands log.
func stderrOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	saved := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = saved }()
	f()
	_ = w.Close()
	return <-read
}

// A client command logs no connection lines at the configured info level; with -v
// it logs them (debug).
func TestClientCommandsLogQuietlyUnlessVerbose(t *testing.T) {
	srv := bustest.StartServerWith(t, bus.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	t.Setenv("AGENTMEM_CONFIG", "")
	t.Setenv("AGENTMEM_LOG_LEVEL", "info")
	for _, verbose := range []bool{false, true} {
		args := []string{"dlq", "list", "--nats-url", srv.ClientURL()}
		if verbose {
			args = append(args, "-v")
		}
		logs := stderrOf(t, func() { _, _ = run(t, args...) })
		if got := strings.Contains(logs, "nats connected"); got != verbose {
			t.Errorf("%v: logged the connection: %v, want %v; stderr:\n%s", args, got, verbose, logs)
		}
	}
}
