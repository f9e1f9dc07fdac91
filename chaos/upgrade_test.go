package chaos

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
)

// previousRelease is the commit the upgrade test builds as the release before
// this one: main as of 2026-11-26 (the USE-lite merge), before the issue 28–35
// work, whose session, turn and extraction values were not yet sealed per user.
// Move it forward when a release is cut.
const previousRelease = "4519befe4fbaee39b9b32eaf9116bdea322e632e"

// TestUpgradeFromPreviousRelease runs the previous release's `agentmem up` on a
// data directory, stops it (SIGTERM, as a rolling update does) while the
// observations and session ends it was sent are still being processed, and
// starts this build's stack on the same directory: the new workers go on from
// the old ones' consumer positions, reading what the old ones stored. Every
// observation is then one memory, every session's tokens are in Markdown
// once, and nothing is dead-lettered.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release: skipped with -short")
	}
	start := time.Now()
	oldBin := buildRelease(t, previousRelease)
	t.Logf("previous release built in %s", time.Since(start).Round(time.Second))
	dataDir := t.TempDir()
	natsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	old := &proc{
		name: "agentmem-" + previousRelease[:7], bin: oldBin,
		args:    []string{"up", "--data-dir", dataDir, "--nats-listen", natsAddr, "--ui=false"},
		env:     append(baseEnv(), "AGENTMEM_HTTP_LISTEN="+httpAddr),
		logPath: filepath.Join(t.TempDir(), "old.log"),
		ready:   httpReady(httpAddr),
	}
	t.Cleanup(old.kill)
	if err := old.start(); err != nil {
		t.Fatal(err)
	}
	if err := old.waitReady(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("previous release ready at %s", time.Since(start).Round(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var sessions []*session
	publish := func(nc *nats.Conn, phase int) {
		t.Helper()
		cl, err := client.New(nc, client.Config{Tenant: tenant, AgentID: "upgrade-test"})
		if err != nil {
			t.Fatal(err)
		}
		for s := range 3 {
			ss := &session{user: fmt.Sprintf("u%d", s%2), id: fmt.Sprintf("p%ds%d", phase, s)}
			for i := range 4 {
				tok := fmt.Sprintf("ck%dx%05d", phase, s*10+i)
				ss.tokens = append(ss.tokens, tok)
				if _, err := cl.Observe(ctx, ss.user, ss.id, events.Observation{Role: events.RoleUser,
					Text: fmt.Sprintf("Remember: my item %s is stored in box %s.", tok, tok[len(tok)-3:])}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cl.EndSession(ctx, ss.user, ss.id); err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, ss)
		}
	}

	// The old release handles a first batch whole, and is stopped in the middle
	// of a second.
	ncOld, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	publish(ncOld, 1)
	waitIdle(ctx, t, ncOld)
	publish(ncOld, 2)
	ncOld.Close()
	if exitErr, err := old.signal(syscall.SIGTERM, time.Minute); err != nil || exitErr != nil {
		t.Fatalf("stopping the previous release: %v, exit %v\n%s", err, exitErr, logTail(old.logPath, 20))
	}

	t.Logf("previous release stopped at %s; left for this build: %s", time.Since(start).Round(time.Second), leftOver(t, cfgStoreDir(dataDir)))

	// This build on the same data directory.
	cfg, err := config.Load("", append(baseEnv(), "AGENTMEM_DATA_DIR="+dataDir, "AGENTMEM_HTTP_LISTEN=", "AGENTMEM_NATS_EMBEDDED_LISTEN="+natsAddr))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := app.Up(ctx, cfg, app.UpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = stack.Close()
		}
	}()
	ncNew, err := nats.Connect(stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer ncNew.Close()
	publish(ncNew, 3)
	waitIdle(ctx, t, ncNew)
	dead := deadLetters(ctx, t, ncNew)
	ncNew.Close()
	if err := stack.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true

	if dead != 0 {
		t.Errorf("%d dead letters after the upgrade, want none", dead)
	}
	// countEpisodes reads each session's user: one session per user.
	users := map[string]*session{}
	for _, ss := range sessions {
		users[ss.user] = ss
	}
	stored, err := countEpisodes(slices.Collect(maps.Values(users)), cfg.Vector.Path)
	if err != nil {
		t.Fatal(err)
	}
	markdown, err := countMarkdown(cfg.Memory.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range sessions {
		for _, tok := range ss.tokens {
			if stored[tok] != 1 || markdown[tok] != 1 {
				t.Errorf("session %s token %s: %d memories and %d Markdown mentions, want 1 and 1", ss.id, tok, stored[tok], markdown[tok])
			}
		}
	}
}

// waitIdle waits until the workers behind nc have handled everything published.
func waitIdle(ctx context.Context, t *testing.T, nc *nats.Conn) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := app.WaitIdle(ctx, js, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// deadLetters counts the messages of the dead-letter stream.
func deadLetters(ctx context.Context, t *testing.T, nc *nats.Conn) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, bus.DefaultDLQStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// buildRelease builds cmd/agentmem as of commit, from `git archive` (no
// worktree is registered in the repository), once: the binary is kept under the
// user's cache directory by commit (a commit's build never changes), since the
// build takes minutes on a loaded machine. Without the commit (a shallow clone)
// the test skips and says how to get it.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "agentmem-test", "release-"+commit, "agentmem")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("the previous release %s is not in this clone's history (a shallow clone? `git fetch --unshallow`): %v", commit[:7], err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = src
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
	}
	tarball := filepath.Join(dir, "src.tar")
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	run("git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", "-o", tarball, commit)
	run("tar", "-xf", tarball)
	built := filepath.Join(dir, "agentmem")
	run("go", "build", "-o", built, "./cmd/agentmem")
	// Into the cache through a rename, so that it never holds half a binary. A
	// cache that cannot be written costs the next run the build, nothing more.
	tmp := bin + fmt.Sprintf(".%d", os.Getpid())
	err = os.MkdirAll(filepath.Dir(bin), 0o755)
	var data []byte
	if err == nil {
		data, err = os.ReadFile(built)
	}
	if err == nil {
		err = os.WriteFile(tmp, data, 0o755)
	}
	if err == nil {
		err = os.Rename(tmp, bin)
	}
	if err != nil {
		t.Logf("the previous release's build is not cached (%v): using it from the test's directory", err)
		return built
	}
	return bin
}

// cfgStoreDir is the JetStream store directory of `agentmem up --data-dir dir`.
func cfgStoreDir(dir string) string { return filepath.Join(dir, "nats") }

// leftOver says how many messages each worker's consumer has not acknowledged
// in the store directory of a stopped stack, read through a server of its own
// (nothing consumes).
func leftOver(t *testing.T, storeDir string) string {
	t.Helper()
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := bus.Connect(bus.ConnConfig{InProcess: srv, Name: "upgrade-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	ctx := context.Background()
	for _, w := range []string{bus.WorkerIngest, bus.WorkerExtractor} {
		c, err := js.Consumer(ctx, bus.DefaultStream, bus.WorkerConsumer(w, bus.ConsumerDefaults{}).Durable)
		if err != nil {
			t.Fatal(err)
		}
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s %d", w, ci.NumPending+uint64(ci.NumAckPending)))
	}
	return strings.Join(parts, ", ")
}
