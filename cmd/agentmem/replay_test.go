package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/diff"
	"github.com/agentmem/agentmem/pkg/replay"
)

// E6 from the command line: replay a user into two shadow namespaces, list them,
// diff them (exit 0: same configuration) and against the live memory while the live
// stack runs and once it has stopped (exit 0), then a replay with other ingest
// settings (exit 1, naming the memories), and drop.
func TestReplayAndDiffCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	t.Setenv("AGENTMEM_CONFIG", "")
	t.Setenv("AGENTMEM_DATA_DIR", dir)
	cfg, err := config.Load("", []string{"AGENTMEM_DATA_DIR=" + dir, "AGENTMEM_HTTP_LISTEN=", "AGENTMEM_NATS_EMBEDDED_LISTEN=127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	stack, err := app.Up(ctx, cfg, app.UpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url := stack.ClientURL()
	ns := []string{"--nats-url", url, "--tenant", "acme"}
	for _, text := range []string{"My sales.csv has columns date, product and qty.", "Noted.", "I prefer bar charts for monthly totals.", "Bar charts it is."} {
		if out, err := run(t, append([]string{"observe", "--user", "u1", "--session", "s1", "--text", text}, ns...)...); err != nil {
			t.Fatalf("observe: %v\n%s", err, out)
		}
	}
	if out, err := run(t, append([]string{"end", "--user", "u1", "--session", "s1"}, ns...)...); err != nil {
		t.Fatalf("end: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"append", "--user", "u1", "--content", "Reports go to finance."}, ns...)...); err != nil {
		t.Fatalf("append: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if out, err := run(t, append([]string{"replay", "--user", "u1", "--name", name}, ns...)...); err != nil || !strings.Contains(out, "events read") {
			t.Fatalf("replay %s: %v\n%s", name, err, out)
		}
	}
	t.Setenv("AGENTMEM_INGEST_CONTEXT_MESSAGES", "-1")
	if out, err := run(t, append([]string{"replay", "--user", "u1", "--name", "noctx", "--workers", "ingest"}, ns...)...); err != nil {
		t.Fatalf("replay noctx: %v\n%s", err, out)
	}
	t.Setenv("AGENTMEM_INGEST_CONTEXT_MESSAGES", "")
	out, err := run(t, "replay", "list", "--tenant", "acme", "--json")
	var list []replay.Manifest
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 3 || list[0].Status != replay.StatusDone {
		t.Fatalf("replay list = %v\n%s", err, out)
	}
	if out, err := run(t, "diff", "--tenant", "acme", "--user", "u1", "--replay", "b", "--against", "a"); err != nil || out != "no difference between a and b\n" {
		t.Fatalf("diff of two equal replays = %v\n%s", err, out)
	}
	// The live side is read through the retriever while the stack runs, and from
	// its stores once it has stopped: the same answers either way.
	checkLive := func(when string) {
		t.Helper()
		if out, err := run(t, "diff", "--tenant", "acme", "--user", "u1", "--replay", "a", "--nats-url", url); err != nil || out != "no difference between live and a\n" {
			t.Fatalf("%s: diff live and replay a = %v\n%s", when, err, out)
		}
		out, err := run(t, "diff", "--tenant", "acme", "--user", "u1", "--replay", "noctx", "--json", "--nats-url", url)
		if code, ok := err.(exitCode); !ok || code != 1 {
			t.Fatalf("%s: diff live and noctx = %v, want exit status 1\n%s", when, err, out)
		}
		var r diff.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Changed) == 0 {
			t.Fatalf("%s: diff --json = %v\n%s", when, err, out)
		}
	}
	checkLive("running")
	if err := stack.Close(); err != nil {
		t.Fatal(err)
	}
	checkLive("stopped")
	for _, name := range []string{"a", "b", "noctx"} {
		if out, err := run(t, "replay", "drop", "--tenant", "acme", "--name", name); err != nil {
			t.Fatalf("drop %s: %v\n%s", name, err, out)
		}
	}
	if out, err := run(t, "replay", "list", "--tenant", "acme", "--json"); err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("replay list after drop = %v\n%s", err, out)
	}

	// The disk with the Markdown is lost; rebuild (the stack is stopped) makes it
	// again, the appended text included; without --yes it does nothing.
	memory := filepath.Join(dir, "memory", "acme", "u1", "MEMORY.md")
	if err := os.RemoveAll(filepath.Join(dir, "memory")); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "rebuild", "--tenant", "acme"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("rebuild without --yes = %v, want an error asking for --yes\n%s", err, out)
	}
	if out, err := run(t, "rebuild", "--tenant", "acme", "--yes"); err != nil || !strings.Contains(out, "rebuild of acme: 1 users") {
		t.Fatalf("rebuild = %v\n%s", err, out)
	}
	if data, err := os.ReadFile(memory); err != nil || !strings.Contains(string(data), "Reports go to finance.") {
		t.Fatalf("MEMORY.md after rebuild = %v\n%s", err, data)
	}
}
