package transfer_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/config"
)

// canaryHits counts canary in every file under dir, binary ones included.
func canaryHits(t *testing.T, dir, canary string) map[string]int {
	t.Helper()
	hits := map[string]int{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := bytes.Count(data, []byte(canary)); n > 0 {
			hits[p] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// upOn starts agentmem up on cfg's data directory; the caller closes it.
func upOn(t *testing.T, cfg config.Config) *app.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stack, err := app.Up(ctx, cfg, app.UpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return stack
}

// After forget returns, no byte of the forgotten user's content is left in the
// data directory, nor after a restart; the other user's content stays. With
// either Markdown backend: files, or the agentmem_docs KV bucket (memory.backend
// jetstream), whose values are sealed with the user's key.
func TestForgetLeavesNoByteOnDisk(t *testing.T) {
	for _, backend := range []string{config.MemoryBackendFilesystem, config.MemoryBackendJetStream} {
		t.Run(backend, func(t *testing.T) { testForgetLeavesNoByteOnDisk(t, backend) })
	}
}

func testForgetLeavesNoByteOnDisk(t *testing.T, backend string) {
	cfg, err := config.Load("", []string{
		"AGENTMEM_DATA_DIR=" + t.TempDir(),
		"AGENTMEM_HTTP_LISTEN=",
		"AGENTMEM_NATS_EMBEDDED_LISTEN=127.0.0.1:0",
		"AGENTMEM_MEMORY_BACKEND=" + backend,
	})
	if err != nil {
		t.Fatal(err)
	}
	stack := upOn(t, cfg)
	defer func() {
		if stack != nil {
			_ = stack.Close()
		}
	}()
	ctx := context.Background()
	cl := apptest.Client(t, stack, "acme")
	canary := map[string]string{"u1": "Zq7canaryVictim", "u2": "Kp3canaryKept"}
	for _, u := range []string{"u1", "u2"} {
		c := canary[u]
		for s := range 3 {
			session := fmt.Sprintf("s%d", s)
			for i := range 6 {
				text := fmt.Sprintf("Remember: my project code is %s-%d and I prefer %s reports.", c, i, c)
				if _, err := cl.Say(ctx, u, session, events.RoleUser, text, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cl.EndSession(ctx, u, session); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cl.Append(ctx, events.AppendRequest{UserID: u, Content: "Note: " + c + " is the vault name."}); err != nil {
			t.Fatal(err)
		}
	}
	apptest.WaitIdle(t, stack)
	for u, c := range canary {
		if len(canaryHits(t, cfg.DataDir, c)) == 0 {
			t.Fatalf("before forget, no file holds %s's canary %s: the test would prove nothing", u, c)
		}
	}
	if _, err := cl.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if hits := canaryHits(t, cfg.DataDir, canary["u1"]); len(hits) > 0 {
			t.Errorf("%s, the forgotten user's canary is still on disk: %v", when, hits)
		}
		if len(canaryHits(t, cfg.DataDir, canary["u2"])) == 0 {
			t.Errorf("%s, the other user's canary is gone: forget erased too much", when)
		}
	}
	check("after forget")
	if err := stack.Close(); err != nil {
		t.Fatal(err)
	}
	stack = upOn(t, cfg)
	apptest.WaitIdle(t, stack)
	check("after a restart")
}
