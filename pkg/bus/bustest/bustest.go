// Package bustest starts real embedded nats-servers for tests.
package bustest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/pkg/bus"
)

// StartServer starts a JetStream nats-server in-process with its own StoreDir under
// t.TempDir(); it is shut down when the test ends.
func StartServer(t testing.TB) *server.Server {
	t.Helper()
	return StartServerIn(t, t.TempDir())
}

// StartServerIn starts a server on storeDir, so a test can restart one on the same data.
// The caller may shut it down early; the cleanup tolerates that.
func StartServerIn(t testing.TB, storeDir string) *server.Server {
	t.Helper()
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: storeDir})
	if err != nil {
		t.Fatalf("start embedded nats-server: %v", err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// Connect opens an in-process client connection to srv, closed when the test ends.
func Connect(t testing.TB, srv *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatalf("connect to embedded nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
