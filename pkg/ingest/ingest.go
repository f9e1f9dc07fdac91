// Package ingest is the first stream worker: it validates every observation (the
// pipeline dead-letters what does not decode), folds it into its session's state
// (counts, recent messages, turns: SPEC D3) and writes the episodic memories the write
// decider keeps (SPEC C3) into the vector store.
//
// Every step is idempotent, so redelivery is harmless: the session state remembers
// the ids of applied events, and an episodic record's id derives from its event id,
// so a second delivery upserts the same record.
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/cognitive"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/pipeline"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// ErrInvalidConfig is returned for a Config or Deps that cannot work.
var ErrInvalidConfig = errors.New("ingest: invalid config")

// Config configures the ingest worker.
type Config struct {
	// Consumer is the durable; default bus.WorkerConsumer(bus.WorkerIngest, defaults).
	Consumer    bus.ConsumerSpec
	Concurrency int
	Router      bus.RouterConfig
}

// Deps are the parts the worker uses. Decider, Vectors and Embedder go together:
// without them no episodic memory is written.
type Deps struct {
	Dial     pipeline.Dialer
	JS       jetstream.JetStream // publishes memory_written
	Sessions *session.Store
	Decider  cognitive.WriteDecider
	Vectors  vectorstore.Store
	Embedder embed.Embedder
	Metrics  *obs.Metrics
}

func (d Deps) validate() error {
	if d.Dial == nil || d.JS == nil || d.Sessions == nil {
		return fmt.Errorf("%w: Dial, JS and Sessions are required", ErrInvalidConfig)
	}
	if (d.Decider == nil) != (d.Vectors == nil) || (d.Vectors == nil) != (d.Embedder == nil) {
		return fmt.Errorf("%w: Decider, Vectors and Embedder must be set together", ErrInvalidConfig)
	}
	return nil
}

// Worker is the ingest worker.
type Worker struct {
	deps   Deps
	worker *pipeline.Worker
	logger *zap.Logger
}

// New returns an ingest worker; nothing connects before Run.
func New(cfg Config, deps Deps, logger *zap.Logger) (*Worker, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if cfg.Consumer.Durable == "" {
		cfg.Consumer = bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{})
	}
	w := &Worker{deps: deps, logger: logger}
	pw, err := pipeline.New(pipeline.Config{
		Worker:      bus.WorkerIngest,
		Consumer:    cfg.Consumer,
		Concurrency: cfg.Concurrency,
		Router:      cfg.Router,
		Dial:        deps.Dial,
		Metrics:     deps.Metrics,
	}, w.Handle, logger)
	if err != nil {
		return nil, err
	}
	w.worker = pw
	return w, nil
}

// Run consumes observations until ctx ends.
func (w *Worker) Run(ctx context.Context) error { return w.worker.Run(ctx) }

// Ready reports whether the worker consumes.
func (w *Worker) Ready(ctx context.Context) error { return w.worker.Ready(ctx) }

// Handle applies one observation; it is the pipeline handler, exported for benchmarks
// that drive ingest without a stream.
func (w *Worker) Handle(ctx context.Context, env events.Envelope) error {
	if env.Type != events.TypeObservation {
		return bus.Permanent(fmt.Errorf("ingest: %s event on an observation subject", env.Type))
	}
	if _, _, err := w.deps.Sessions.Apply(ctx, env); err != nil {
		return err
	}
	if w.deps.Decider == nil || env.Observation.EffectiveKind() != events.KindMessage || strings.TrimSpace(env.Observation.Text) == "" {
		return nil
	}
	// The episodic write runs even when the session state had seen the event: the
	// earlier delivery may have failed between the two, and the upsert is idempotent.
	id, written, err := w.writeEpisode(ctx, env)
	if err != nil || !written {
		return err
	}
	return w.publishWritten(ctx, env, id)
}

func (w *Worker) writeEpisode(ctx context.Context, env events.Envelope) (string, bool, error) {
	o := env.Observation
	cobs := cognitive.Observation{
		Role:    string(o.Role),
		Text:    o.Text,
		TS:      env.TS,
		ChatID:  env.SessionID,
		Who:     cognitive.Speaker(o.Meta),
		EventID: env.ID,
	}
	ep, err := w.deps.Decider.Decide(ctx, cobs)
	if err != nil {
		return "", false, fmt.Errorf("ingest: write decision for %s: %w", env.ID, err)
	}
	if !ep.Write {
		return "", false, nil
	}
	rec := cognitive.EpisodeRecord(env.Tenant, env.UserID, cobs, ep)
	rec.Metadata[cognitive.MetaSourceEventIDs] = []any{env.ID}
	if len(o.Meta) > 0 {
		rec.Metadata[cognitive.MetaSourceMeta] = []any{cognitive.PlainMeta(o.Meta)}
	}
	vecs, err := w.deps.Embedder.Embed(ctx, []string{rec.Text})
	if err != nil {
		return "", false, fmt.Errorf("ingest: embed %s: %w", env.ID, err)
	}
	rec.Vector = vecs[0]
	if err := w.deps.Vectors.Upsert(ctx, rec); err != nil {
		return "", false, fmt.Errorf("ingest: store episode of %s: %w", env.ID, err)
	}
	return rec.ID, true, nil
}

// publishWritten tells the consolidator that the namespace has new memories. The
// message id derives from the observation, so a redelivery publishes nothing new.
func (w *Worker) publishWritten(ctx context.Context, src events.Envelope, memoryID string) error {
	env := events.New(events.TypeMemoryWritten, src.Tenant, src.UserID, src.AgentID, src.SessionID)
	env.ID = "written-" + src.ID
	env.MemoryWritten = &events.MemoryWritten{MemoryIDs: []string{memoryID}, SourceSessionID: src.SessionID}
	subject, err := env.Subject()
	if err != nil {
		return bus.Permanent(err)
	}
	data, err := json.Marshal(env)
	if err != nil {
		return bus.Permanent(err)
	}
	if _, err := w.deps.JS.Publish(ctx, subject, data, jetstream.WithMsgID(env.ID)); err != nil {
		return fmt.Errorf("ingest: publish memory_written for %s: %w", src.ID, err)
	}
	return nil
}
