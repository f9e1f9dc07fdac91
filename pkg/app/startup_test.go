package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/config"
)

// Start-up failures come back as errors that say what failed; before, the
// deferred clean-up of a half-built runtime dereferenced the nil that the failing
// return had put in the named result, and the real error was lost in a panic.
func TestStartupFailuresAreErrorsNotPanics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("NATS unreachable", func(t *testing.T) {
		cfg, err := config.Load("", []string{"AGENTMEM_DATA_DIR=" + t.TempDir(), "AGENTMEM_NATS_URL=nats://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := app.NewRuntime(ctx, cfg, nil, nil)
		if err == nil {
			_ = rt.Close()
			t.Fatal("NewRuntime connected to nothing")
		}
		if !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("error %q does not name the server it could not reach", err)
		}
	})

	t.Run("vector store held by another process", func(t *testing.T) {
		holder := upStack(t)
		cfg, err := config.Load("", []string{
			"AGENTMEM_DATA_DIR=" + t.TempDir(),
			"AGENTMEM_HTTP_LISTEN=",
			"AGENTMEM_VECTOR_PATH=" + holder.cfg.Vector.Path,
		})
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(cfg.NATS.Embedded.StoreDir) == filepath.Dir(holder.cfg.NATS.Embedded.StoreDir) {
			t.Fatal("the second stack must have a JetStream store of its own")
		}
		stack, err := app.Up(ctx, cfg, app.UpOptions{}, nil)
		if err == nil {
			_ = stack.Close()
			t.Fatal("a second stack opened a vector store another one holds")
		}
		if !strings.Contains(err.Error(), holder.cfg.Vector.Path) && !strings.Contains(err.Error(), "lock") {
			t.Errorf("error %q names neither the store nor its lock", err)
		}
	})
}
