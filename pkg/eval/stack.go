package eval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
)

// stackConfig loads the configuration of the evaluation's private stack: the
// caller's file and environment, with everything that stores or listens pinned under
// dir (so an evaluation never writes into a real deployment's Qdrant collection or
// JetStream) and both vector K raised to maxK so a pack can hold maxK items.
func stackConfig(file string, environ []string, dir string, maxK int) (config.Config, error) {
	k := strconv.Itoa(maxK)
	overrides := map[string]string{
		"data_dir":                dir,
		"memory.dir":              filepath.Join(dir, "memory"),
		"memory.backend":          config.MemoryBackendFilesystem,
		"vector.backend":          config.VectorBackendEmbedded,
		"vector.path":             filepath.Join(dir, "vectors.db"),
		"nats.embedded.store_dir": filepath.Join(dir, "nats"),
		"nats.embedded.listen":    "",
		"http.listen":             "",
		"vector.k_episodic":       k,
		"vector.k_semantic":       k,
	}
	env := append([]string(nil), environ...)
	for key, v := range overrides {
		env = append(env, config.EnvName(key)+"="+v)
	}
	cfg, err := config.Load(file, env)
	if err != nil {
		return config.Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return cfg, nil
}

// stack is agentmem in this process, like app.Up, in two phases: replay runs every
// component; freeze then stops all but the retriever, so the evaluation's own
// questions (whose memory_hit events the consolidator would otherwise apply and
// reconsolidate, writing each question's text into the memories it recalled) do not
// change the memory between questions: every question sees the same memory, in any
// order.
type stack struct {
	srv    *server.Server
	rt     *app.Runtime
	cancel context.CancelFunc
	done   chan error
}

func startStack(ctx context.Context, cfg config.Config, logger *zap.Logger) (*stack, error) {
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: cfg.NATS.Embedded.StoreDir})
	if err != nil {
		return nil, err
	}
	rt, err := app.NewRuntime(ctx, cfg, srv, logger)
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	s := &stack{srv: srv, rt: rt}
	if err := s.serve(ctx, app.Components); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// serve runs the named components until the next serve or close, and returns once
// they are ready.
func (s *stack) serve(ctx context.Context, names []string) error {
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- app.Serve(runCtx, s.rt, names, func() { close(ready) }) }()
	s.cancel, s.done = cancel, done
	select {
	case <-ready:
		return nil
	case err := <-done:
		done <- err
		return fmt.Errorf("eval: components %v stopped while starting: %w", names, err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop stops the running components; in-flight messages finish first.
func (s *stack) stop() error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	return <-s.done
}

// freeze keeps only the retriever running.
func (s *stack) freeze(ctx context.Context) error {
	if err := s.stop(); err != nil {
		return err
	}
	return s.serve(ctx, []string{app.Retriever})
}

func (s *stack) close() error {
	err := errors.Join(s.stop(), s.rt.Close())
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return err
}
