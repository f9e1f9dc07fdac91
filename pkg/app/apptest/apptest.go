// Package apptest starts the real all-in-one stack (app.Up) for tests of packages
// that talk to agentmem as a client would: a temporary data directory, an embedded
// NATS server with a TCP listener on a free loopback port.
package apptest

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/natsauth"
	"github.com/agentmem/agentmem/pkg/pipeline"
)

// Up runs the stack until the test ends. env adds AGENTMEM_* settings
// ("AGENTMEM_HTTP_LISTEN=127.0.0.1:0"); by default the operations server is off.
func Up(t testing.TB, env ...string) (*app.Stack, config.Config) {
	t.Helper()
	return UpLogged(t, nil, env...)
}

// UpLogged is Up with the stack logging to logger. A stack whose components
// stopped on purpose (pipeline.ErrStopped: a model refused its configuration)
// closes without failing the test.
func UpLogged(t testing.TB, logger *zap.Logger, env ...string) (*app.Stack, config.Config) {
	t.Helper()
	stack, cfg, _ := up(t, logger, false, env...)
	return stack, cfg
}

// UpAuth runs the stack as `agentmem up --auth` does: keys under the data
// directory's auth/, every client needs a credential (Creds).
func UpAuth(t testing.TB, env ...string) (*app.Stack, config.Config, *natsauth.Authority) {
	t.Helper()
	return up(t, nil, true, env...)
}

func up(t testing.TB, logger *zap.Logger, auth bool, env ...string) (*app.Stack, config.Config, *natsauth.Authority) {
	t.Helper()
	cfg, err := config.Load("", append([]string{
		"AGENTMEM_DATA_DIR=" + t.TempDir(),
		"AGENTMEM_HTTP_LISTEN=",
		"AGENTMEM_NATS_EMBEDDED_LISTEN=127.0.0.1:0",
	}, env...))
	if err != nil {
		t.Fatal(err)
	}
	var opts app.UpOptions
	if auth {
		if opts.Auth, err = natsauth.New(natsauth.Config{Dir: natsauth.KeyDir(cfg.DataDir)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stack, err := app.Up(ctx, cfg, opts, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stack.Close(); err != nil && !errors.Is(err, pipeline.ErrStopped) {
			t.Errorf("stack close: %v", err)
		}
	})
	return stack, cfg, opts.Auth
}

// Creds issues a credential of tenant with role into a file of the test and
// returns its path.
func Creds(t testing.TB, auth *natsauth.Authority, tenant string, role natsauth.Role) string {
	t.Helper()
	creds, err := auth.TenantCreds(tenant, role)
	return credsFile(t, tenant, creds, err)
}

// AgentCreds writes tenant's agent credential bound to agentID to a file and
// returns its path.
func AgentCreds(t testing.TB, auth *natsauth.Authority, tenant, agentID string) string {
	t.Helper()
	creds, err := auth.AgentCreds(tenant, agentID)
	return credsFile(t, tenant, creds, err)
}

func credsFile(t testing.TB, tenant string, creds []byte, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), tenant+".creds")
	if err := natsauth.WriteCreds(path, creds); err != nil {
		t.Fatal(err)
	}
	return path
}

// Client connects to the stack over TCP and returns a client for tenant.
func Client(t testing.TB, stack *app.Stack, tenant string) *client.Client {
	t.Helper()
	nc, err := nats.Connect(stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Config{Tenant: tenant, AgentID: "test-agent"})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// CredsClient connects to the stack over TCP with the credentials file creds and
// returns a client for tenant and its connection (closed when the test ends).
func CredsClient(t testing.TB, stack *app.Stack, creds, tenant string) (*client.Client, *nats.Conn) {
	t.Helper()
	nc, err := client.Connect(stack.ClientURL(), creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Config{Tenant: tenant, AgentID: "test-agent"})
	if err != nil {
		t.Fatal(err)
	}
	return cl, nc
}

// WaitIdle waits until the pipeline has handled everything published so far.
func WaitIdle(t testing.TB, stack *app.Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// LimitChecks runs the rapid properties of the test n times unless
// -rapid.checks says otherwise: for properties whose every case drives whole
// stacks, where rapid's default 100 cases would take minutes.
func LimitChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || f.Value.String() != f.DefValue {
		return
	}
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(f.DefValue) })
}
