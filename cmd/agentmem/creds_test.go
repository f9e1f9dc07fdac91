package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// syncBuffer is a bytes.Buffer that `up`, running in a goroutine, writes while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// `agentmem up --auth --data-dir D`, then `agentmem creds add --data-dir D --tenant
// acme --out f.creds`: client commands with AGENTMEM_NATS_CREDS_FILE=f.creds work,
// without it they are refused, and with it they cannot speak for another tenant.
func TestUpWithAuthAndTenantCredentials(t *testing.T) {
	dir := t.TempDir()
	addr := bustest.FreeAddr(t)
	t.Setenv("AGENTMEM_CONFIG", "")
	t.Setenv("AGENTMEM_HTTP_LISTEN", "")
	t.Setenv("AGENTMEM_LOG_LEVEL", "error")

	ctx, cancel := context.WithCancel(context.Background())
	root := newRoot()
	var out syncBuffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"up", "--auth", "--data-dir", dir, "--nats-listen", addr})
	upDone := make(chan error, 1)
	go func() { upDone <- root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-upDone; err != nil {
			t.Errorf("up: %v", err)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "agentmem is up") {
		select {
		case err := <-upDone:
			upDone <- err
			t.Fatalf("up stopped: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("up is not up:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "creds add") {
		t.Errorf("up --auth does not say how to get a credential:\n%s", out.String())
	}

	creds := filepath.Join(t.TempDir(), "f.creds")
	if out, err := run(t, "creds", "add", "--data-dir", dir, "--tenant", "acme", "--out", creds); err != nil {
		t.Fatalf("creds add: %v\n%s", err, out)
	}
	if fi, err := os.Stat(creds); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("creds file: %v %v, want mode 0600", fi, err)
	}
	if data, _ := os.ReadFile(creds); !bytes.Contains(data, []byte("BEGIN NATS USER JWT")) || !bytes.Contains(data, []byte("BEGIN USER NKEY SEED")) {
		t.Fatalf("not a .creds file:\n%s", data)
	}

	ns := []string{"--nats-url", "nats://" + addr, "--tenant", "acme", "--user", "u1"}
	if out, err := run(t, append([]string{"observe", "--session", "s1", "--text", "x"}, ns...)...); err == nil {
		t.Fatalf("observe without a credential succeeded:\n%s", out)
	}

	t.Setenv("AGENTMEM_NATS_CREDS_FILE", creds)
	if out, err := run(t, append([]string{"observe", "--session", "s1", "--text", "My sales.csv has columns date, product and qty."}, ns...)...); err != nil {
		t.Fatalf("observe: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"end", "--session", "s1"}, ns...)...); err != nil {
		t.Fatalf("end: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"append", "--content", "Quarterly reports go to finance."}, ns...)...); err != nil || !strings.Contains(out, "MEMORY.md") {
		t.Fatalf("append: %v\n%s", err, out)
	}
	var got string
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(200 * time.Millisecond) {
		o, err := run(t, append([]string{"context", "--query", "which columns does my sales file have?"}, ns...)...)
		if err != nil {
			t.Fatalf("context: %v\n%s", err, o)
		}
		if got = o; strings.Contains(o, "qty") && strings.Contains(o, "finance") {
			break
		}
	}
	if !strings.Contains(got, "qty") || !strings.Contains(got, "finance") {
		t.Fatalf("context after observe/end/append:\n%s", got)
	}
	for _, key := range []string{"operator.nk", "account.nk", "system.nk"} {
		seed, err := os.ReadFile(filepath.Join(dir, "auth", key))
		if err != nil || strings.Contains(out.String(), strings.TrimSpace(string(seed))) {
			t.Fatalf("%s: %v, or up printed the seed", key, err)
		}
	}
	if out, err := run(t, "context", "--nats-url", "nats://"+addr, "--tenant", "globex", "--user", "u1"); err == nil || !strings.Contains(err.Error(), `tenant "acme"`) {
		t.Fatalf("acme's credential spoke for globex: %v\n%s", err, out)
	}

	// Issue 30.7: a command the credential's permissions refuse says so at once,
	// without waiting for its timeout or printing a stack trace.
	start := time.Now()
	dlqOut, err := run(t, "dlq", "list", "--nats-url", "nats://"+addr)
	if took := time.Since(start); !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "permissions violation") || took > 10*time.Second {
		t.Fatalf("dlq list with a tenant credential: %v after %s, want the refusal at once\n%s", err, took, dlqOut)
	}
	if strings.Contains(dlqOut, ".go:") || strings.Contains(dlqOut, "goroutine") || strings.Contains(err.Error(), "deadline") {
		t.Fatalf("dlq list's refusal came with a stack trace or a timeout:\n%v\n%s", err, dlqOut)
	}

	// Roles, the register and revocation: the agent credential above is listed,
	// revoked while `up` runs, and refused from then on; acme's admin credential
	// keeps working.
	admin := filepath.Join(t.TempDir(), "admin.creds")
	if out, err := run(t, "creds", "add", "--data-dir", dir, "--tenant", "acme", "--role", "admin", "--out", admin); err != nil || !strings.Contains(out, "(admin)") {
		t.Fatalf("creds add --role admin: %v\n%s", err, out)
	}
	if out, err := run(t, "creds", "add", "--data-dir", dir, "--tenant", "acme", "--role", "boss", "--out", admin+".x"); err == nil {
		t.Fatalf("creds add --role boss succeeded:\n%s", out)
	}
	agentID, err := natsauth.InspectFile(creds)
	if err != nil || agentID.Role != natsauth.RoleAgent {
		t.Fatalf("the default role: %+v %v", agentID, err)
	}

	// Issue 31: an agent credential bound to reporter (creds add --agent)
	// writes reporter's scope with append and add --scope agent, and no
	// other agent's: the server refuses those at once. An admin's is not bound.
	bound := filepath.Join(t.TempDir(), "reporter.creds")
	if out, err := run(t, "creds", "add", "--data-dir", dir, "--tenant", "acme", "--agent", "reporter", "--out", bound); err != nil || !strings.Contains(out, "(agent reporter)") {
		t.Fatalf("creds add --agent reporter: %v\n%s", err, out)
	}
	if out, err := run(t, "creds", "add", "--data-dir", dir, "--tenant", "acme", "--role", "admin", "--agent", "reporter", "--out", bound+".x"); err == nil {
		t.Fatalf("creds add --role admin --agent succeeded:\n%s", out)
	}
	boundID, err := natsauth.InspectFile(bound)
	if err != nil || boundID.AgentID != "reporter" || boundID.Role != natsauth.RoleAgent {
		t.Fatalf("the bound credential: %+v %v", boundID, err)
	}
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", bound)
	scoped := []string{"--nats-url", "nats://" + addr, "--tenant", "acme", "--scope", "agent"}
	for _, args := range [][]string{
		{"append", "--content", "Reports export with the pdf flag."}, // --agent: the credential's
		{"add", "--agent", "reporter", "--type", "semantic", "--text", "Reports render with the wide template."},
	} {
		if out, err := run(t, append(args, scoped...)...); err != nil {
			t.Fatalf("%v with reporter's credential: %v\n%s", args, err, out)
		}
	}
	// The pack's agent is the credential's too: reporter's scope holds the append.
	if pack, err := run(t, "context", "--json", "--nats-url", "nats://"+addr, "--tenant", "acme", "--user", "u1", "--query", "how are reports exported"); err != nil ||
		!regexp.MustCompile(`(?s)"scope": "agent".{0,400}pdf flag|pdf flag.{0,400}"scope": "agent"`).MatchString(pack) {
		t.Fatalf("context with reporter's credential, no --agent: %v, want reporter's append in the agent scope\n%s", err, pack)
	}
	for _, args := range [][]string{
		{"append", "--agent", "auditor", "--content", "Reports may be deleted."},
		{"add", "--agent", "auditor", "--text", "Reports may be deleted."},
	} {
		if out, err := run(t, append(args, scoped...)...); err == nil || !strings.Contains(err.Error(), `bound to agent "reporter"`) {
			t.Fatalf("%v with reporter's credential: %v, want the refusal\n%s", args, err, out)
		}
	}
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", creds)

	listed, err := run(t, "creds", "list", "--data-dir", dir, "--tenant", "acme")
	if err != nil || !regexp.MustCompile(agentID.PublicKey+`\s+acme\s+agent\s+-\s+\d{4}-`).MatchString(listed) ||
		!regexp.MustCompile(boundID.PublicKey+`\s+acme\s+agent\s+reporter\s+\d{4}-`).MatchString(listed) || strings.Contains(listed, "service") {
		t.Fatalf("creds list --tenant acme: %v\n%s", err, listed)
	}
	if out, err := run(t, "creds", "revoke", "--data-dir", dir, "--tenant", "acme", "--key", agentID.PublicKey, "--nats-url", "nats://"+addr); err != nil {
		t.Fatalf("creds revoke: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"observe", "--session", "s2", "--text", "after the revocation"}, ns...)...); err == nil {
		t.Fatalf("the revoked credential still observes:\n%s", out)
	}
	t.Setenv("AGENTMEM_NATS_CREDS_FILE", admin)
	if out, err := run(t, append([]string{"observe", "--session", "s2", "--text", "the admin observes"}, ns...)...); err != nil {
		t.Fatalf("the admin credential: %v\n%s", err, out)
	}
	if listed, err := run(t, "creds", "list", "--data-dir", dir); err != nil || !regexp.MustCompile(agentID.PublicKey+`\s+acme\s+agent\s+-\s+\S+\s+\d{4}-`).MatchString(listed) || !strings.Contains(listed, "service") {
		t.Fatalf("creds list after the revocation: %v\n%s", err, listed)
	}
}
