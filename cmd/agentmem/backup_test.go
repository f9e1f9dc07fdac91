package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/app"
)

// TestBackupRestoreCommands: `agentmem backup` of a running stack and `agentmem
// restore` into a new data directory give the memory back; a second restore
// into the same directory and a restore of a damaged backup are refused, saying
// why.
func TestBackupRestoreCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, url := upForCLI(t, ctx)
	if out, err := run(t, "append", "--nats-url", url, "--tenant", "acme", "--user", "u1", "--content", "Finance reports are due on Fridays."); err != nil {
		t.Fatalf("append: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, src.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bk")
	out, err := run(t, "backup", "--nats-url", url, "--out", dir)
	if err != nil || !strings.Contains(out, "backup in "+dir) {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	data := t.TempDir()
	out, err = run(t, "restore", "--in", dir, "--data-dir", data)
	if err != nil || !strings.Contains(out, "restored ") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	md, err := os.ReadFile(filepath.Join(data, "memory", "acme", "u1", "MEMORY.md"))
	if err != nil || !strings.Contains(string(md), "Finance reports are due on Fridays.") {
		t.Fatalf("restored MEMORY.md: %v\n%s", err, md)
	}
	if out, err := run(t, "restore", "--in", dir, "--data-dir", data); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a second restore into %s: %v\n%s", data, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "vectors.db"), []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "restore", "--in", dir, "--data-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "vectors.db has 7 bytes") {
		t.Fatalf("a restore of a damaged backup: %v\n%s", err, out)
	}
}
