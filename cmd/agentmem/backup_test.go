package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/natsauth"
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

// TestBackupRestoreUnderAuth: a deployment run with `up --auth`, backed up
// with its service credential and restored with its key directory (--keys),
// comes back under `up --auth` with the same credentials: the tenant's
// credential issued before the backup reads the memory and writes more, and
// the service credential is the same file. Without --keys, or with another
// deployment's keys, the restore is refused, saying why, and writes nothing.
func TestBackupRestoreUnderAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	src, url, srcData := upAuthForCLI(t, ctx)
	acme := filepath.Join(t.TempDir(), "acme.creds")
	if out, err := run(t, "creds", "add", "--data-dir", srcData, "--tenant", "acme", "--out", acme); err != nil {
		t.Fatalf("creds add: %v\n%s", err, out)
	}
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", acme)
	if out, err := run(t, "append", "--nats-url", url, "--tenant", "acme", "--user", "u1", "--content", "Finance reports are due on Fridays."); err != nil {
		t.Fatalf("append: %v\n%s", err, out)
	}
	// The session lives in the streams and buckets only (events, state).
	if out, err := run(t, "observe", "--nats-url", url, "--tenant", "acme", "--user", "u1", "--session", "s1", "--text", "The quarterly audit starts on Monday."); err != nil {
		t.Fatalf("observe: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, src.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	service := filepath.Join(natsauth.KeyDir(srcData), natsauth.ServiceCredsFile)
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", service)
	dir := filepath.Join(t.TempDir(), "bk")
	if out, err := run(t, "backup", "--nats-url", url, "--out", dir); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if err := src.Close(); err != nil { // the restored stack alone from here
		t.Fatal(err)
	}

	data := t.TempDir()
	if out, err := run(t, "restore", "--in", dir, "--data-dir", data); err == nil || !strings.Contains(err.Error(), "NATS authentication") || !strings.Contains(err.Error(), "--keys") {
		t.Fatalf("restore without --keys: %v\n%s", err, out)
	}
	otherKeys := t.TempDir()
	if _, err := natsauth.New(natsauth.Config{Dir: otherKeys}, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "restore", "--in", dir, "--data-dir", data, "--keys", otherKeys); err == nil || !strings.Contains(err.Error(), "the backup's streams are account") {
		t.Fatalf("restore with another deployment's keys: %v\n%s", err, out)
	}
	if left, err := os.ReadDir(data); err != nil || len(left) != 0 {
		t.Fatalf("the refused restores left %v in the data directory (%v)", left, err)
	}
	if out, err := run(t, "restore", "--in", dir, "--data-dir", data, "--keys", natsauth.KeyDir(srcData)); err != nil {
		t.Fatalf("restore --keys: %v\n%s", err, out)
	}
	for _, f := range []string{natsauth.ServiceCredsFile, "account.nk", "operator.nk"} {
		want, _ := os.ReadFile(filepath.Join(natsauth.KeyDir(srcData), f))
		if got, err := os.ReadFile(filepath.Join(natsauth.KeyDir(data), f)); err != nil || string(got) != string(want) || len(want) == 0 {
			t.Errorf("restored key directory's %s: %v, not the deployment's", f, err)
		}
	}

	a, err := natsauth.New(natsauth.Config{Dir: natsauth.KeyDir(data)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	restored, url2 := upStackForCLI(t, ctx, data, app.UpOptions{Auth: a})
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", acme)
	ns := []string{"--nats-url", url2, "--tenant", "acme", "--user", "u1"}
	if out, err := run(t, append([]string{"append", "--content", "Payroll closes on the 25th."}, ns...)...); err != nil {
		t.Fatalf("append with the tenant's credential after the restore: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, restored.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, append([]string{"context", "--query", "when are finance reports due?"}, ns...)...)
	if err != nil || !strings.Contains(out, "Finance reports are due on Fridays.") || !strings.Contains(out, "Payroll closes on the 25th.") {
		t.Fatalf("context with the tenant's credential after the restore: %v\n%s", err, out)
	}
	out, err = run(t, append([]string{"context", "--json", "--session", "s1", "--query", "audit"}, ns...)...)
	var pack events.ContextPack
	if err != nil || json.Unmarshal([]byte(out), &pack) != nil || len(pack.RecentEvents) != 1 || pack.RecentEvents[0].Obs == nil ||
		pack.RecentEvents[0].Obs.Text != "The quarterly audit starts on Monday." {
		t.Fatalf("the session after the restore: %v, want its one observation among the recent events\n%s", err, out)
	}
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", "")
	if out, err := run(t, append([]string{"context", "--query", "finance"}, ns...)...); err == nil {
		t.Fatalf("the restored deployment answered without a credential:\n%s", out)
	}
}
