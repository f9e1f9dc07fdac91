package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	out, err := run(t, "replay", "list", "--tenant", "acme", "--json", "--nats-url", url)
	var list []replay.Manifest
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 3 || list[0].Status != replay.StatusDone {
		t.Fatalf("replay list = %v\n%s", err, out)
	}
	if out, err := run(t, "diff", "--tenant", "acme", "--user", "u1", "--replay", "b", "--against", "a", "--nats-url", url); err != nil || out != "no difference between a and b\n" {
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
		if out, err := run(t, "replay", "drop", "--tenant", "acme", "--name", name, "--nats-url", url); err != nil {
			t.Fatalf("drop %s: %v\n%s", name, err, out)
		}
	}
	if out, err := run(t, "replay", "list", "--tenant", "acme", "--json", "--nats-url", url); err != nil || strings.TrimSpace(out) != "[]" {
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

// A deployment's replay directory is its servers' host:port, the same however
// the URL is written, and never a path of more than one element.
func TestDeploymentDir(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                    "127.0.0.1_4222",
		"nats://localhost:4222":                    "127.0.0.1_4222",
		"127.0.0.1":                                "127.0.0.1_4222",
		"tls://alice:secret@NATS.example.com:4443": "nats.example.com_4443",
		"nats://a:4222, nats://b:4223":             "a_4222+b_4223",
		"nats://[::1]:4222":                        "___1__4222",
		"":                                         "_",
		"..":                                       ".._4222",
	} {
		if got := deploymentDir(in); got != want {
			t.Errorf("deploymentDir(%q) = %q, want %q", in, got, want)
		}
	}
	if deploymentDir("nats://127.0.0.1:4222") == deploymentDir("nats://127.0.0.1:4223") {
		t.Error("two deployments on one host share a directory")
	}
}

func FuzzDeploymentDir(f *testing.F) {
	for _, s := range []string{"nats://127.0.0.1:4222", "a:1,b:2", "../x", "nats://u:p@h/../..", ".", "\x00/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, urls string) {
		d := deploymentDir(urls)
		if d == "" || d == "." || d == ".." || strings.ContainsAny(d, `/\`+"\x00") || filepath.Base(d) != d {
			t.Fatalf("deploymentDir(%q) = %q: not one path element", urls, d)
		}
	})
}

// Issue 35: two deployments each get their replay r1 from the same client
// (data directory), each listed, compared and dropped on its own.
func TestReplaysBelongToTheirDeployment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Setenv("AGENTMEM_DATA_DIR", t.TempDir()) // the client's: its replays
	stacks := map[string]*app.Stack{}
	var urls []string
	for range 2 {
		stack, url := upForCLI(t, ctx)
		stacks[url] = stack
		urls = append(urls, url)
	}
	for i, url := range urls {
		text := fmt.Sprintf("Deployment %d keeps its reports in folder %d.", i, i)
		if out, err := run(t, "observe", "--nats-url", url, "--tenant", "acme", "--user", "u1", "--session", "s1", "--text", text); err != nil {
			t.Fatalf("observe: %v\n%s", err, out)
		}
		if err := app.WaitIdle(ctx, stacks[url].Runtime().JS, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if out, err := run(t, "replay", "--nats-url", url, "--tenant", "acme", "--name", "r1"); err != nil {
			t.Fatalf("replay r1 on deployment %d: %v\n%s", i, err, out)
		}
	}
	for i, url := range urls {
		out, err := run(t, "replay", "list", "--nats-url", url, "--tenant", "acme", "--json")
		var list []replay.Manifest
		if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Name != "r1" {
			t.Fatalf("replay list of deployment %d = %v\n%s", i, err, out)
		}
		if out, err := run(t, "diff", "--nats-url", url, "--tenant", "acme", "--user", "u1", "--replay", "r1"); err != nil {
			t.Fatalf("diff of deployment %d with its own r1 = %v\n%s", i, err, out)
		}
	}
	if out, err := run(t, "replay", "drop", "--nats-url", urls[0], "--tenant", "acme", "--name", "r1"); err != nil {
		t.Fatalf("drop: %v\n%s", err, out)
	}
	if out, err := run(t, "replay", "list", "--nats-url", urls[1], "--tenant", "acme", "--json"); err != nil || !strings.Contains(out, `"r1"`) {
		t.Fatalf("dropping r1 of one deployment dropped the other's: %v\n%s", err, out)
	}
}
