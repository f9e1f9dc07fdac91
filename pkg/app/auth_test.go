package app_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// With authentication (`agentmem up --auth`) the whole pipeline runs on the service
// credential, a tenant's agent observes and gets context end to end over TCP with
// its own credential, another tenant's credential gets nothing of it, and a client
// without a credential is refused.
func TestUpWithAuthServesTenantsInIsolation(t *testing.T) {
	dataDir := t.TempDir()
	cfg, err := config.Load("", []string{
		"AGENTMEM_DATA_DIR=" + dataDir,
		"AGENTMEM_HTTP_LISTEN=",
		"AGENTMEM_NATS_EMBEDDED_LISTEN=127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := natsauth.New(natsauth.Config{Dir: natsauth.KeyDir(dataDir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, err := app.Up(ctx, cfg, app.UpOptions{Auth: auth}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stack.Close(); err != nil {
			t.Errorf("stack close: %v", err)
		}
	}()
	url := stack.ClientURL()

	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("connected without a credential")
	}

	tenantClient := func(tenant string, timeout time.Duration) *client.Client {
		t.Helper()
		creds, err := auth.TenantCreds(tenant, natsauth.RoleAgent)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), tenant+".creds")
		if err := natsauth.WriteCreds(path, creds); err != nil {
			t.Fatal(err)
		}
		nc, err := client.Connect(url, path, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		// The client speaks for acme whatever its credential says: globex's tries.
		cl, err := client.New(nc, client.Config{Tenant: "acme", AgentID: "bot", RequestTimeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}

	acme := tenantClient("acme", 10*time.Second)
	if _, err := acme.Say(ctx, "u1", "s1", events.RoleUser, "My sales.csv has columns date, product and qty.", nil); err != nil {
		t.Fatalf("acme observes: %v", err)
	}
	if _, err := acme.EndSession(ctx, "u1", "s1"); err != nil {
		t.Fatalf("acme ends its session: %v", err)
	}
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	pack, err := acme.Context(ctx, events.ContextRequest{UserID: "u1", Query: "which columns does my sales file have?"})
	if err != nil || !strings.Contains(pack.Prompt, "qty") {
		t.Fatalf("acme's context: %v\n%s", err, pack.Prompt)
	}

	globex := tenantClient("globex", time.Second)
	if _, err := globex.Context(ctx, events.ContextRequest{UserID: "u1", Query: "sales"}); err == nil {
		t.Fatal("globex got acme's context")
	}
	if _, err := globex.Say(ctx, "u1", "s1", events.RoleUser, "injected", nil); !errors.Is(err, client.ErrPublish) {
		t.Fatalf("globex published into acme's session: %v", err)
	}
}
