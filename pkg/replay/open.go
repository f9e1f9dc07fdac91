package replay

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
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
	rt, closeFn, err := OpenStopped(ctx, cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("replay: open %s: %w", name, err)
	}
	return &Shadow{Manifest: m, Runtime: rt, close: closeFn}, nil
}

// OpenStopped opens the runtime (stores) of a stack that is not running, on an
// embedded NATS server without a listener over cfg's nats.embedded.store_dir; the
// returned function closes both.
func OpenStopped(ctx context.Context, cfg config.Config, logger *zap.Logger) (*app.Runtime, func() error, error) {
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: cfg.NATS.Embedded.StoreDir})
	if err != nil {
		return nil, nil, err
	}
	rt, err := app.NewRuntime(ctx, cfg, srv, logger)
	if err != nil {
		srv.Shutdown()
		return nil, nil, err
	}
	return rt, func() error {
		err := rt.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		return err
	}, nil
}

// Close releases the shadow's stores and server.
func (s *Shadow) Close() error { return s.close() }
