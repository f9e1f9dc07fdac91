package replay

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/docstore"
)

func docNamespace(tenant, user string) docstore.Namespace {
	return docstore.Namespace{Tenant: tenant, User: user}
}

// Shadow is an opened replay: its stores, for reading (pkg/diff). No worker runs.
type Shadow struct {
	Manifest Manifest
	Runtime  *app.Runtime
	close    func() error
}

// Open opens replay name of tenant under root with the configuration file and
// environment given (storage is pinned under its directory whatever they say).
func Open(ctx context.Context, root, tenant, name, file string, environ []string, logger *zap.Logger) (*Shadow, error) {
	dir := Dir(root, tenant, name)
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := stackConfig(file, environ, dir)
	if err != nil {
		return nil, err
	}
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: cfg.NATS.Embedded.StoreDir})
	if err != nil {
		return nil, fmt.Errorf("replay: open %s: %w", name, err)
	}
	rt, err := app.NewRuntime(ctx, cfg, srv, logger)
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("replay: open %s: %w", name, err)
	}
	return &Shadow{Manifest: m, Runtime: rt, close: func() error {
		err := rt.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		return errors.Join(err)
	}}, nil
}

// Close releases the shadow's stores and server.
func (s *Shadow) Close() error { return s.close() }
