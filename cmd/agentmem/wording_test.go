package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// valueName is what a flag's help may show for its value: a type ("string",
// "duration") or a placeholder ("ADDR"), one word. pflag takes a back-quoted
// phrase of the usage as the placeholder, which made `--auth agentmem creds
// add` read as if the flag took words.
var valueName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// Issue 35: no flag of any command shows a phrase as its value.
func TestFlagHelpShowsOneWordValues(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); name != "" && !valueName.MatchString(name) {
				t.Errorf("%s --%s shows its value as %q", c.CommandPath(), f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

// upInBackground runs `agentmem up args...` until the test ends and returns its
// output and a channel with its result once it has stopped.
func upInBackground(t *testing.T, ctx context.Context, args ...string) (*syncBuffer, chan error) {
	t.Helper()
	t.Setenv("AGENTMEM_CONFIG", "")
	t.Setenv("AGENTMEM_LOG_LEVEL", "error")
	root := newRoot()
	out := &syncBuffer{}
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(append([]string{"up", "--data-dir", t.TempDir(), "--nats-listen", "127.0.0.1:0"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	return out, done
}

// Issue 35: `up --http-listen ADDR` serves the operations server there, says
// "stopping…" when interrupted; an address in use is reported naming the flag,
// the key and the variable that set it; `up --help` shows the flag.
func TestUpHTTPListen(t *testing.T) {
	help, err := run(t, "up", "--help")
	if err != nil || !strings.Contains(help, "--http-listen ADDR") || !strings.Contains(help, "AGENTMEM_HTTP_LISTEN") || !strings.Contains(help, `"127.0.0.1:9090"`) {
		t.Fatalf("up --help = %v, want --http-listen ADDR, AGENTMEM_HTTP_LISTEN and the loopback default:\n%s", err, help)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, done := upInBackground(t, ctx, "--http-listen", busy.Addr().String())
	err = <-done
	for _, want := range []string{busy.Addr().String(), "--http-listen", "http.listen", "AGENTMEM_HTTP_LISTEN"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("up on an address in use = %v, want it to name %q", err, want)
		}
	}

	addr := bustest.FreeAddr(t)
	upCtx, stop := context.WithCancel(ctx)
	out, done := upInBackground(t, upCtx, "--http-listen", addr)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), "agentmem is up"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("up is not up:\n%s", out.String())
		}
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("the operations server is not on --http-listen %s: %v", addr, err)
	}
	_ = resp.Body.Close()
	if !strings.Contains(out.String(), "http://"+addr+"/metrics") {
		t.Errorf("up does not print the operations address %s:\n%s", addr, out.String())
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("up after Ctrl-C: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "stopping…") || !strings.HasSuffix(out.String(), "stopped.\n") {
		t.Fatalf("up said nothing while stopping:\n%s", out.String())
	}
}

// Issue 35: what the client commands say, against a running stack: a readable
// search table (JSON with --json), "nothing" said out loud, an oversized text
// refused before anything is published, and errors that say what is wrong once.
func TestClientCommandWording(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, url := upForCLI(t, ctx)
	ns := []string{"--nats-url", url, "--tenant", "acme", "--user", "u1"}
	cmd := func(args ...string) (string, error) {
		t.Helper()
		return run(t, append(args, ns...)...)
	}

	// Nothing yet: each list says it is empty.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backups", "list"}, "no backups for user u1"},
		{[]string{"policy", "history"}, "no policy snapshots for user u1"},
		{[]string{"topic", "--topic", "user_prefs"}, "topic user_prefs of user u1 is empty"},
		{[]string{"search", "--query", "finance"}, "no results"},
		{[]string{"compress", "--dry-run"}, "MEMORY.md not compressed: there is no MEMORY.md"},
		{[]string{"events", "list"}, "no events of tenant acme match"},
	} {
		if out, err := cmd(tc.args...); err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v on an empty memory = %v, want %q:\n%s", tc.args, err, tc.want, out)
		}
	}
	t.Setenv("AGENTMEM_DATA_DIR", t.TempDir())
	if out, err := run(t, "replay", "list", "--nats-url", url, "--tenant", "acme"); err != nil || out != "no replays of tenant acme on this deployment\n" {
		t.Errorf("replay list with none = %v:\n%s", err, out)
	}

	if out, err := cmd("append", "--content", "Quarterly reports go to finance."); err != nil {
		t.Fatalf("append: %v\n%s", err, out)
	}
	out, err := cmd("compress", "--dry-run")
	if err != nil || !strings.Contains(out, "MEMORY.md not compressed: nothing to compress") || strings.Contains(out, "Quarterly") {
		t.Errorf("compress --dry-run with nothing to do = %v, want that said and no copy of the file:\n%s", err, out)
	}

	out, err = cmd("search", "--query", "finance")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || !strings.HasPrefix(lines[0], "SCORE") || !strings.Contains(lines[0], "ID") ||
		!strings.Contains(lines[1], "MEMORY.md#L") || !strings.Contains(lines[1], "Quarterly reports go to finance.") || lines[2] != "1 result(s); --json for the whole reply" {
		t.Errorf("search = %v, want a header, the one memory with its id and a count:\n%s", err, out)
	}
	out, err = cmd("search", "--query", "finance", "--json")
	var reply events.SearchReply
	if err != nil || json.Unmarshal([]byte(out), &reply) != nil || len(reply.Results) != 1 || !strings.Contains(reply.Results[0].Text, "Quarterly reports go to finance.") {
		t.Errorf("search --json = %v, want the reply as JSON:\n%s", err, out)
	}

	// 70 KB of text: refused, naming the limit, and not published.
	big := strings.Repeat("x", 70<<10)
	if out, err := cmd("observe", "--session", "big", "--text", big); !errors.Is(err, events.ErrTooLarge) ||
		!strings.Contains(err.Error(), "observation.text is 71680 bytes, limit 65536") || !strings.Contains(err.Error(), "limits.max_text_bytes") {
		t.Fatalf("observe of 70 KB = %v, want it refused naming limits.max_text_bytes:\n%.200s", err, out)
	}
	if out, err := run(t, "events", "count", "--nats-url", url, "--tenant", "acme", "--user", "u1", "--session", "big"); err != nil || out != "0\n" {
		t.Fatalf("events of the refused observation = %v %q, want 0", err, out)
	}
	// At the limit it is published.
	if out, err := cmd("observe", "--session", "big", "--text", big[:events.DefaultMaxTextBytes]); err != nil {
		t.Fatalf("observe at the limit: %v\n%.200s", err, out)
	}

	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"search", "--query", ""}, "agentmem search: 400 invalid request: query is required", "agentmem: agentmem"},
		{[]string{"observe", "--session", "s1", "--role", "bogus", "--text", "hi"}, `client: invalid event: observation.role is "bogus"`, "invalid event: invalid event"},
		{[]string{"observe", "--session", "s.1", "--text", "hi"}, `--session "s.1" has character '.'`, "invalid event"},
	} {
		_, err := cmd(tc.args...)
		if err == nil || !strings.Contains(errorLine(err), tc.want) || strings.Contains(errorLine(err), tc.not) {
			t.Errorf("%v = %v, want %q and not %q", tc.args, err, tc.want, tc.not)
		}
	}
	if _, err := run(t, "search", "--nats-url", url, "--tenant", "a.b", "--user", "u1", "--query", "x"); err == nil ||
		!strings.Contains(err.Error(), `--tenant "a.b" has character '.'`) || strings.Contains(err.Error(), "invalid config") {
		t.Errorf("a bad --tenant = %v, want it named as the flag's", err)
	}
}
