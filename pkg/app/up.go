package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// ErrNotReady is returned by Up when the components do not become ready in time.
var ErrNotReady = errors.New("app: stack not ready")

// ErrUpOptions is returned by Up for options that contradict each other.
var ErrUpOptions = errors.New("app: up options")

// UpOptions configures the all-in-one stack beyond the configuration file.
type UpOptions struct {
	// ReadyTimeout bounds the wait for every component; default 60s.
	ReadyTimeout time.Duration
	// Auth, when set, runs the embedded server with authentication (`agentmem up
	// --auth`): it trusts only the credentials Auth issues, and the stack itself
	// connects with a service credential written to Auth's directory.
	Auth *natsauth.Authority
	// External connects every component to nats.url (`agentmem up --nats-url`:
	// a NATS server or cluster run elsewhere, with the configuration's
	// credentials and TLS) instead of starting an embedded server. A cluster is
	// what nats.stream.replicas > 1 needs. Auth manages an embedded server's
	// trust, so the two do not go together.
	External bool
}

// Stack is everything in one process: an embedded JetStream server (none with
// UpOptions.External) and all four components on the runtime built from the
// configuration (SPEC E8).
type Stack struct {
	srv          *server.Server // nil with UpOptions.External
	rt           *Runtime
	readyTimeout time.Duration
	cancel       context.CancelFunc // stops the components currently served
	done         chan error         // their Serve result; holds it again once read
}

// Up starts the embedded NATS server (StoreDir nats.embedded.store_dir, TCP listener
// nats.embedded.listen when set), or with opts.External connects to nats.url, and
// starts every component; it returns once all are ready.
func Up(ctx context.Context, cfg config.Config, opts UpOptions, logger *zap.Logger) (*Stack, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.External {
		if opts.Auth != nil {
			return nil, fmt.Errorf("%w: Auth configures the embedded server, which External replaces (give the external server's credential in nats.creds_file)", ErrUpOptions)
		}
		rt, err := NewRuntime(ctx, cfg, nil, logger)
		if err != nil {
			return nil, err
		}
		return start(ctx, nil, rt, opts)
	}
	embedded := bus.EmbeddedConfig{StoreDir: cfg.NATS.Embedded.StoreDir, Listen: cfg.NATS.Embedded.Listen}
	if opts.Auth != nil {
		trust, err := opts.Auth.Trust()
		if err != nil {
			return nil, err
		}
		creds, err := opts.Auth.WriteServiceCreds()
		if err != nil {
			return nil, err
		}
		embedded.Auth = &trust
		cfg.NATS = withCreds(cfg.NATS, creds)
	}
	srv, err := bus.StartEmbedded(embedded)
	if err != nil {
		return nil, err
	}
	rt, err := NewRuntime(ctx, cfg, srv, logger)
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	return start(ctx, srv, rt, opts)
}

// start serves every component on rt (and srv, nil when external) until all
// are ready.
func start(ctx context.Context, srv *server.Server, rt *Runtime, opts UpOptions) (*Stack, error) {
	s := &Stack{srv: srv, rt: rt, readyTimeout: opts.ReadyTimeout}
	if err := s.serve(ctx, Components); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// withCreds is n authenticating with the credentials file at path instead of any
// method it names.
func withCreds(n config.NATS, path string) config.NATS {
	n.CredsFile, n.NKeyFile, n.User, n.Password, n.PasswordFile, n.TokenFile = path, "", "", "", "", ""
	return n
}

// serve runs the named components and waits until they are ready.
func (s *Stack) serve(ctx context.Context, names []string) error {
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	ready := make(chan struct{})
	go func() { s.done <- Serve(runCtx, s.rt, names, func() { close(ready) }) }()
	select {
	case <-ready:
		return nil
	case err := <-s.done:
		s.done <- err
		return fmt.Errorf("app: components %v stopped while starting: %w", names, err)
	case <-time.After(s.readyTimeout):
		return fmt.Errorf("%w after %s", ErrNotReady, s.readyTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop stops the components being served (in-flight messages finish) and returns
// their error; it may be called again.
func (s *Stack) stop() error {
	s.cancel()
	err := <-s.done
	s.done <- err
	return err
}

// Restart stops the components (in-flight messages finish) and serves only names,
// on the same server and runtime: e.g. a retriever alone, so that nothing changes
// the memory while it is being measured.
func (s *Stack) Restart(ctx context.Context, names []string) error {
	if err := s.stop(); err != nil {
		return err
	}
	return s.serve(ctx, names)
}

// Runtime is the stack's shared runtime (stores, connection).
func (s *Stack) Runtime() *Runtime { return s.rt }

// Server is the embedded NATS server, nil with UpOptions.External.
func (s *Stack) Server() *server.Server { return s.srv }

// ClientURL is the URL other processes connect to: nats.url with
// UpOptions.External, else the embedded server's, or "" without a TCP listener.
func (s *Stack) ClientURL() string {
	if s.srv == nil {
		return s.rt.Config.NATS.URL
	}
	if s.srv.Addr() == nil {
		return ""
	}
	return s.srv.ClientURL()
}

// Done reports the end of the served components: their error, or nil after Close.
// Reading it leaves the result for Close (which otherwise waited forever for a
// result already taken).
func (s *Stack) Done() <-chan error {
	out, done := make(chan error, 1), s.done
	go func() {
		err := <-done
		done <- err
		out <- err
	}()
	return out
}

// Close stops the components (in-flight messages finish), then the runtime and the
// embedded server.
func (s *Stack) Close() error {
	err := errors.Join(s.stop(), s.rt.Close())
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
	return err
}
