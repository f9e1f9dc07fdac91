// Package app wires agentmem's components from one configuration: the shared
// runtime (NATS connection, streams, stores, models) that every binary builds the
// same way, the components themselves, the operations server, and the all-in-one
// stack of `agentmem up` with an embedded NATS server.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/breaker"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/embed/uselite"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/priority"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
	"github.com/agentmem/agentmem/pkg/vectorstore/qdrant"
)

// Runtime holds the parts every component of one process shares. Components that
// consume or serve open their own connections through Dial; Conn is for the stores
// and for publishing.
type Runtime struct {
	Config   config.Config
	Logger   *zap.Logger
	Registry *prometheus.Registry
	Conn     *nats.Conn
	JS       jetstream.JetStream
	Docs     *docstore.Store
	Events   *eventstore.Store
	Sessions *session.Store
	// Keyring holds each user's data key, which seals their values in the KV
	// buckets and which forget erases.
	Keyring  *kvcas.Keyring
	Vectors  vectorstore.Store
	Embedder embed.Embedder
	LLM      *llm.Client // nil: offline, rule-based processors
	// Priority lets the retriever's requests go ahead of ingest batches when both
	// run in this process (agentmem up).
	Priority *priority.Gate
	// Breakers are the circuit breakers of the model endpoints in use (chat
	// model, embedder), each shared by every step that calls its endpoint: the
	// stream workers' gate and the ready checks "llm" and "embedder".
	Breakers breaker.Group

	connCfg bus.ConnConfig
	closers []func() error
	mem     *memory.Service     // built on first use, shared
	run     *consolidate.Runner // built on first use, shared
	procs   *processors         // built on first use, shared
	// The lifecycle's (SPEC B2, B4, B5), built on first use, shared.
	lcMetrics *lifecycle.Metrics
	compact   *lifecycle.Compactor
	policies  *lifecycle.Policies
	// The tenants' quotas (quotas.*), built on first use, shared.
	rate  *quota.Rate
	meter *quota.Meter
}

// NewRuntime connects to NATS (in-process to srv when it is not nil), provisions the
// streams and builds the stores and models that cfg selects. cfg comes from
// config.Load (or LoadConfig), the single point where a configuration is validated;
// NewRuntime does not validate it again.
func NewRuntime(ctx context.Context, cfg config.Config, srv *server.Server, logger *zap.Logger) (*Runtime, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	applyGCPolicy(cfg.Runtime, logger)
	connCfg, err := connConfig(cfg.NATS, srv)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{Config: cfg, Logger: logger, Registry: obs.NewRegistry(), Priority: priority.New(0), connCfg: connCfg}
	if err := rt.open(ctx); err != nil {
		_ = rt.Close()
		return nil, err
	}
	return rt, nil
}

// open connects, provisions the streams and builds the stores and models; Close
// releases whatever it opened, also when it failed halfway.
func (rt *Runtime) open(ctx context.Context) error {
	// The models first: a missing key file or a bad URL is one clear error before
	// anything is connected or opened.
	if err := rt.newModels(); err != nil {
		return err
	}
	var err error
	if rt.Conn, err = rt.Dial("agentmem-runtime"); err != nil {
		return err
	}
	rt.onClose(func() error { rt.Conn.Close(); return nil })
	// An asynchronous publish (ingest's memory_written and summary_due, the
	// retriever's hits) whose ack never comes fails like a synchronous one: its
	// leader died before answering, and waiting out the handler's whole
	// deadline stalled ingest for minutes behind a cluster's leader election.
	js, err := jetstream.New(rt.Conn, jetstream.WithPublishAsyncTimeout(kvcas.RequestTimeout))
	if err != nil {
		return fmt.Errorf("app: jetstream: %w", err)
	}
	// Every stream and bucket of every component is provisioned through rt.JS,
	// so all of them get nats.stream.replicas.
	rt.JS = bus.WithReplicas(js, rt.Config.NATS.Stream.Replicas)
	if err := bus.ProvisionStreams(ctx, rt.JS, bus.StreamConfig{
		MaxAge:          rt.Config.NATS.Stream.MaxAge,
		DLQMaxAge:       rt.Config.NATS.Stream.DLQMaxAge,
		DuplicateWindow: rt.Config.NATS.Stream.DuplicateWindow,
	}); err != nil {
		return err
	}
	claims, err := eventstore.EnsureClaims(ctx, rt.JS)
	if err != nil {
		return err
	}
	if rt.Events, err = eventstore.New(eventstore.Config{Limits: rt.Config.Limits.Events(), Claims: claims,
		Claimant: bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{}).Durable}, rt.JS, rt.Logger); err != nil {
		return err
	}
	if rt.Keyring, err = kvcas.NewKeyring(ctx, rt.JS, kvcas.KeyringConfig{}); err != nil {
		return err
	}
	if rt.Sessions, err = session.New(ctx, session.Config{Keyring: rt.Keyring}, rt.JS, rt.Logger); err != nil {
		return err
	}
	if rt.Docs, err = rt.newDocs(ctx); err != nil {
		return err
	}
	if err := rt.checkEmbedder(ctx); err != nil {
		return err
	}
	if rt.Vectors, err = rt.newVectors(ctx); err != nil {
		return err
	}
	rt.onClose(rt.Vectors.Close)
	return nil
}

// newModels builds the embedder and, unless offline, the chat client: key files
// read, URLs parsed, settings checked. Errors wrap ErrModelConfig and name the
// configuration key, never a credential.
func (rt *Runtime) newModels() error {
	var err error
	if rt.Embedder, err = rt.newEmbedder(); err != nil {
		return fmt.Errorf("%w: embed: %w", ErrModelConfig, err)
	}
	if o, ok := remoteEmbedder(rt.Embedder); ok {
		b, err := rt.newBreaker(EndpointEmbedder, o.Endpoint(), classifyEmbed)
		if err != nil {
			return err
		}
		rt.Embedder = guardedEmbedder{Embedder: rt.Embedder, b: b}
	}
	if rt.Config.LLM.Offline() {
		return nil
	}
	key, err := rt.Config.LLM.APIKeyValue()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrModelConfig, err)
	}
	llmMetrics, err := obs.NewLLMMetrics(rt.Registry)
	if err != nil {
		return err
	}
	endpoint, err := llm.EndpointOf(rt.Config.LLM.BaseURL)
	if err != nil {
		return fmt.Errorf("%w: llm: %w", ErrModelConfig, err)
	}
	guard, err := rt.newBreaker(EndpointLLM, endpoint, classifyLLM)
	if err != nil {
		return err
	}
	if rt.LLM, err = llm.New(llm.Config{BaseURL: rt.Config.LLM.BaseURL, Model: rt.Config.LLM.Model, APIKey: key, Timeout: rt.Config.LLM.Timeout, MaxRetries: rt.Config.LLM.MaxRetries,
		Concurrency: rt.Config.LLM.Concurrency, Observer: llmMetrics, Guard: guard}, rt.Logger); err != nil {
		return fmt.Errorf("%w: llm: %w", ErrModelConfig, err)
	}
	return nil
}

// Dial opens a new connection with the runtime's settings; the caller closes it.
func (rt *Runtime) Dial(name string) (*nats.Conn, error) {
	c := rt.connCfg
	c.Name = name
	return bus.Connect(c, rt.Logger)
}

// Close releases what NewRuntime opened, in reverse order.
func (rt *Runtime) Close() error {
	var errs []error
	for i := len(rt.closers) - 1; i >= 0; i-- {
		errs = append(errs, rt.closers[i]())
	}
	rt.closers = nil
	return errors.Join(errs...)
}

func (rt *Runtime) onClose(f func() error) { rt.closers = append(rt.closers, f) }

func (rt *Runtime) newDocs(ctx context.Context) (*docstore.Store, error) {
	m := rt.Config.Memory
	var (
		backend docstore.Backend
		err     error
	)
	switch m.Backend {
	case config.MemoryBackendJetStream:
		backend, err = docstore.NewJetStream(ctx, docstore.JetStreamConfig{Keyring: rt.Keyring}, rt.JS, rt.Logger)
	default:
		backend, err = docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: m.Dir}, rt.Logger)
	}
	if err != nil {
		return nil, err
	}
	return docstore.New(docstore.Config{AutoLoadLines: m.AutoLoadLines, MaxLines: m.MaxLines, TargetLines: m.TargetLines, BackupsKeep: m.BackupsKeep}, backend, rt.Logger)
}

func (rt *Runtime) newEmbedder() (embed.Embedder, error) {
	e := rt.Config.Embed
	switch e.Provider {
	case config.EmbedProviderUSELite:
		enc, err := uselite.New(uselite.Config{ModelDir: e.ModelDir}, rt.Logger)
		if err != nil {
			return nil, fmt.Errorf("embed.model_dir: %w", err)
		}
		return enc, nil
	case config.EmbedProviderOpenAI:
		key, err := e.APIKeyValue()
		if err != nil {
			return nil, err
		}
		return embed.NewOpenAI(embed.OpenAIConfig{BaseURL: e.BaseURL, Model: e.Model, APIKey: key, Dimensions: e.Dimensions, BatchSize: e.BatchSize}, rt.Logger)
	default:
		return embed.NewLocal(embed.LocalConfig{Dimensions: e.Dimensions})
	}
}

func (rt *Runtime) newVectors(ctx context.Context) (vectorstore.Store, error) {
	v := rt.Config.Vector
	if v.Backend == config.VectorBackendQdrant {
		key, err := v.Qdrant.APIKeyValue()
		if err != nil {
			return nil, err
		}
		return qdrant.New(ctx, qdrant.Config{
			Addr:       v.Qdrant.Addr,
			APIKey:     key,
			UseTLS:     v.Qdrant.TLS.InUse(),
			CAFile:     v.Qdrant.TLS.CAFile,
			Collection: v.Collection,
			Dimensions: rt.Embedder.Dimensions(),
		}, rt.Logger)
	}
	if err := os.MkdirAll(filepath.Dir(v.Path), 0o755); err != nil {
		return nil, fmt.Errorf("app: vector store directory: %w", err)
	}
	return embedded.New(embedded.Config{Path: v.Path, Dimensions: rt.Embedder.Dimensions(), MaxLoadedRecords: v.MaxLoadedRecords}, rt.Logger)
}

// Connect opens a client connection with the configuration's URL, credentials and
// TLS, for command-line clients and tools; onRefused, when set, hears of every
// permission violation (bus.ConnConfig.OnRefused).
func Connect(n config.NATS, name string, onRefused func(error), logger *zap.Logger) (*nats.Conn, error) {
	c, err := connConfig(n, nil)
	if err != nil {
		return nil, err
	}
	c.Name, c.OnRefused = name, onRefused
	return bus.Connect(c, logger)
}

func connConfig(n config.NATS, srv *server.Server) (bus.ConnConfig, error) {
	password, err := n.PasswordValue()
	if err != nil {
		return bus.ConnConfig{}, err
	}
	token, err := n.TokenValue()
	if err != nil {
		return bus.ConnConfig{}, err
	}
	url := n.URL
	if srv != nil {
		url = "" // in-process: nats.url names some other server
	}
	c := bus.ConnConfig{
		URL:       url,
		CredsFile: n.CredsFile,
		NKeyFile:  n.NKeyFile,
		User:      n.User,
		Password:  password,
		Token:     token,
		InProcess: srv,
	}
	if n.TLS.InUse() {
		c.TLS = bus.TLSConfig{CAFile: n.TLS.CAFile, CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile, ServerName: n.TLS.ServerName}
	}
	return c, nil
}
