package app

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentmem/agentmem/pkg/backup"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/retrieve"
)

// backedUp is the retriever with the backup endpoints (pkg/backup) beside it:
// the retriever is the component that holds the write requests, and in
// `agentmem up` its process owns the stores.
type backedUp struct {
	*retrieve.Service
	backup *backup.Server
}

// withBackup adds the backup endpoints to the retriever svc, served on conn.
func (rt *Runtime) withBackup(svc *retrieve.Service, conn *nats.Conn, logger *zap.Logger) (Component, error) {
	cfg := backup.ServerConfig{Replicas: rt.Config.NATS.Stream.Replicas}
	if rt.Config.Memory.Backend == config.MemoryBackendFilesystem {
		cfg.Markdown = rt.Config.Memory.Dir
	}
	deps := backup.ServerDeps{Conn: conn, JS: rt.JS, HoldWrites: svc.HoldWrites}
	// The embedded store copies itself; Qdrant through its REST snapshot API
	// when vector.qdrant.http_url names it, else a begin says what to set.
	q, err := QdrantBackup(rt.Config)
	switch {
	case err != nil:
		return nil, err
	case q != nil:
		deps.Vectors, deps.VectorBackend = *q, backup.VectorQdrant
	default:
		if v, ok := rt.Vectors.(backup.FileSnapshotter); ok {
			deps.Vectors = v
		}
	}
	srv, err := backup.NewServer(cfg, deps, logger)
	if err != nil {
		return nil, err
	}
	return backedUp{Service: svc, backup: srv}, nil
}

// Run serves the retriever and the backup endpoints until ctx ends.
func (b backedUp) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return b.Service.Run(ctx) })
	g.Go(func() error { return b.backup.Run(ctx) })
	return g.Wait()
}

// QdrantBackup is the Qdrant collection of cfg as `agentmem backup` and
// `restore` copy it (vector.qdrant.http_url, vector.collection); nil without
// the qdrant backend or without http_url.
func QdrantBackup(cfg config.Config) (*backup.Qdrant, error) {
	v := cfg.Vector
	if v.Backend != config.VectorBackendQdrant || v.Qdrant.HTTPURL == "" {
		return nil, nil
	}
	key, err := v.Qdrant.APIKeyValue()
	if err != nil {
		return nil, err
	}
	return &backup.Qdrant{URL: v.Qdrant.HTTPURL, Collection: v.Collection, APIKey: key}, nil
}
