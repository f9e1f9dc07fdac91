package consolidate

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrInvalidConfig reports a configuration or dependency set that cannot work.
	ErrInvalidConfig = errors.New("consolidate: invalid config")
	// ErrInvalidInput reports an argument that can never be processed (a bad id, an
	// event of the wrong type or namespace).
	ErrInvalidInput = errors.New("consolidate: invalid input")
	// ErrLeaseHeld reports that another run holds the namespace: retry later (the
	// retriever's consolidate endpoint answers 503).
	ErrLeaseHeld = errors.New("consolidate: namespace lease held by another run")
	// ErrLeaseLost reports that a run lost its lease before it finished (it could
	// not renew it within the TTL): the run stopped and should be retried.
	ErrLeaseLost = errors.New("consolidate: namespace lease lost")
)

// Defaults of RunnerConfig.
const (
	DefaultLeaseBucket      = "agentmem_leases"
	DefaultLeaseTTL         = 30 * time.Second
	DefaultStateBucket      = "agentmem_consolidation"
	DefaultSemanticLookback = 24 * time.Hour
	// MinLeaseTTL keeps the renewal period (TTL/3) well above a KV round trip.
	MinLeaseTTL = 300 * time.Millisecond
)

// History records the changes of a memory (SPEC C2 history); pkg/memory's
// HistoryLog implements it. Append records changes in order, all or none.
type History interface {
	Append(ctx context.Context, tenant, userID, memoryID string, changes ...events.Change) error
}

// Sweeper deletes a namespace's expired memory items and says how many (SPEC D4);
// pkg/memory's Service implements it.
type Sweeper interface {
	SweepExpired(ctx context.Context, tenant, userID string) (int, error)
}

// Operations written to History by the consolidator (events.Change.Op).
const (
	OpAdd           = "add"
	OpMerge         = "merge"
	OpMergedInto    = "merged_into"
	OpSeparate      = "separate"
	OpHit           = "hit"
	OpReconsolidate = "reconsolidate"
)

// RunnerConfig configures a Runner. Zero fields take the defaults noted.
type RunnerConfig struct {
	// LeaseBucket is the KV bucket of namespace leases; default "agentmem_leases".
	LeaseBucket string
	// LeaseTTL is how long a lease outlives its holder's last renewal; default 30s,
	// at least MinLeaseTTL. It is the bucket's TTL: use one value everywhere.
	LeaseTTL time.Duration
	// Thresholds of the merge/separate planner; zero fields take the SPEC values.
	Thresholds Thresholds
	// StateBucket keeps per-namespace state (last run, semantic watermark); default
	// "agentmem_consolidation".
	StateBucket string
	// SemanticLookback is how far before the watermark the semantic writer re-reads
	// episodes, so that one ingested late is still seen; default 24h.
	SemanticLookback time.Duration
	// ReconsolidateWindow is how long after a reconsolidation a context pack
	// without a session leaves the memory alone; default 1h. Packs of a session
	// reconsolidate a memory once per session.
	ReconsolidateWindow time.Duration
	// MaxReconsolidations bounds the rewrites one batch of hits asks for (one
	// model call each, one after the other, within one handler's deadline);
	// default DefaultMaxReconsolidations. A hot namespace's batch uses far more
	// memories than a model can rewrite in that time: unbounded, the batch
	// missed its deadline, was retried whole and the hits never drained (issue
	// 32). The memories past the bound still count their hits and are shed
	// (agentmem_reconsolidations_total{outcome="shed"}): they keep their text and
	// are reconsolidated by a later use.
	MaxReconsolidations int
}

func (c *RunnerConfig) setDefaults() {
	if c.LeaseBucket == "" {
		c.LeaseBucket = DefaultLeaseBucket
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.StateBucket == "" {
		c.StateBucket = DefaultStateBucket
	}
	if c.SemanticLookback == 0 {
		c.SemanticLookback = DefaultSemanticLookback
	}
	if c.ReconsolidateWindow == 0 {
		c.ReconsolidateWindow = DefaultReconsolidateWindow
	}
	if c.MaxReconsolidations == 0 {
		c.MaxReconsolidations = DefaultMaxReconsolidations
	}
	d := DefaultThresholds()
	c.Thresholds.Merge = cmp.Or(c.Thresholds.Merge, d.Merge)
	c.Thresholds.Separate = cmp.Or(c.Thresholds.Separate, d.Separate)
	c.Thresholds.SameChatWindow = cmp.Or(c.Thresholds.SameChatWindow, d.SameChatWindow)
	c.Thresholds.CrossChatWindow = cmp.Or(c.Thresholds.CrossChatWindow, d.CrossChatWindow)
}

// Validate reports what is wrong with the configuration (after defaults), naming
// the field.
func (c RunnerConfig) Validate() error {
	for _, b := range []struct{ field, name string }{{"LeaseBucket", c.LeaseBucket}, {"StateBucket", c.StateBucket}} {
		if err := events.ValidateID(b.field, b.name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if c.LeaseBucket == c.StateBucket {
		return fmt.Errorf("%w: LeaseBucket and StateBucket are both %q", ErrInvalidConfig, c.LeaseBucket)
	}
	if c.LeaseTTL < MinLeaseTTL {
		return fmt.Errorf("%w: LeaseTTL is %s, want at least %s", ErrInvalidConfig, c.LeaseTTL, MinLeaseTTL)
	}
	if c.SemanticLookback < 0 {
		return fmt.Errorf("%w: SemanticLookback is %s, want >= 0", ErrInvalidConfig, c.SemanticLookback)
	}
	if c.ReconsolidateWindow < 0 {
		return fmt.Errorf("%w: ReconsolidateWindow is %s, want >= 0", ErrInvalidConfig, c.ReconsolidateWindow)
	}
	if c.MaxReconsolidations < 0 {
		return fmt.Errorf("%w: MaxReconsolidations is %d, want >= 0", ErrInvalidConfig, c.MaxReconsolidations)
	}
	if err := c.Thresholds.Validate(); err != nil {
		return fmt.Errorf("%w: Thresholds: %w", ErrInvalidConfig, err)
	}
	return nil
}

// RunnerDeps are the parts a Runner uses. JS, Vectors, Embedder, History and
// Sweeper are required; a nil processor takes the rule-based one.
type RunnerDeps struct {
	JS             jetstream.JetStream
	Vectors        vectorstore.Store
	Embedder       embed.Embedder
	Merger         processor.Merger
	Separator      processor.Separator
	Semantic       processor.SemanticWriter
	Reconsolidator processor.Reconsolidator
	History        History
	Sweeper        Sweeper
	// Now stamps state, history and update entries; default time.Now.
	Now func() time.Time
	// Owner names this process in leases; unique per process. Default
	// "<hostname>-<pid>-<random>".
	Owner string
	// Metrics, when set, gets agentmem_reconsolidations_total{outcome} and
	// agentmem_leases_lost_total.
	Metrics prometheus.Registerer
}

func (d *RunnerDeps) setDefaults() error {
	if d.Merger == nil {
		d.Merger = processor.NewRuleMerger()
	}
	if d.Separator == nil {
		d.Separator = processor.NewRuleSeparator()
	}
	if d.Semantic == nil {
		d.Semantic = processor.NewRuleSemanticWriter()
	}
	if d.Reconsolidator == nil {
		d.Reconsolidator = processor.NewRuleReconsolidator()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Owner == "" {
		host, _ := os.Hostname()
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("consolidate: owner id: %w", err)
		}
		d.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	return nil
}

func (d RunnerDeps) validate() error {
	switch {
	case d.JS == nil:
		return fmt.Errorf("%w: RunnerDeps.JS is nil", ErrInvalidConfig)
	case d.Vectors == nil:
		return fmt.Errorf("%w: RunnerDeps.Vectors is nil", ErrInvalidConfig)
	case d.Embedder == nil:
		return fmt.Errorf("%w: RunnerDeps.Embedder is nil", ErrInvalidConfig)
	case d.History == nil:
		return fmt.Errorf("%w: RunnerDeps.History is nil", ErrInvalidConfig)
	case d.Sweeper == nil:
		return fmt.Errorf("%w: RunnerDeps.Sweeper is nil", ErrInvalidConfig)
	}
	return nil
}

// Runner consolidates namespaces and applies memory hits, one at a time per
// namespace across all processes (see the package doc). Safe for concurrent use.
type Runner struct {
	metrics runnerMetrics
	cfg     RunnerConfig
	deps    RunnerDeps
	leases  *leases
	state   jetstream.KeyValue
	logger  *zap.Logger
}

// NewRunner creates (or updates) the lease and state buckets and returns a Runner.
func NewRunner(ctx context.Context, cfg RunnerConfig, deps RunnerDeps, logger *zap.Logger) (*Runner, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if err := deps.setDefaults(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	leaseKV, err := kvcas.EnsureKV(ctx, deps.JS, jetstream.KeyValueConfig{
		Bucket:      cfg.LeaseBucket,
		Description: "agentmem consolidator namespace leases",
		TTL:         cfg.LeaseTTL,
		History:     1,
	})
	if err != nil {
		return nil, fmt.Errorf("consolidate: %w", err)
	}
	stateKV, err := kvcas.EnsureKV(ctx, deps.JS, jetstream.KeyValueConfig{
		Bucket:      cfg.StateBucket,
		Description: "agentmem consolidator state per namespace",
		History:     1,
	})
	if err != nil {
		return nil, fmt.Errorf("consolidate: %w", err)
	}
	metrics, err := newRunnerMetrics(deps.Metrics)
	if err != nil {
		return nil, err
	}
	logger = logger.With(zap.String("owner", deps.Owner))
	return &Runner{
		metrics: metrics,
		cfg:     cfg,
		deps:    deps,
		leases:  &leases{kv: leaseKV, ttl: cfg.LeaseTTL, owner: deps.Owner, now: deps.Now, logger: logger, metrics: metrics},
		state:   stateKV,
		logger:  logger,
	}, nil
}

// Owner is the name this Runner holds leases under.
func (r *Runner) Owner() string { return r.deps.Owner }

// namespaceKey is the KV key of a namespace in every consolidator bucket; IDs
// have no dots, so it is unambiguous.
func namespaceKey(tenant, userID string) string { return tenant + "." + userID }

func validateNamespace(tenant, userID string) error {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if err := events.ValidateID("user_id", userID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return nil
}

// withLease runs fn under the namespace lease; fn's context ends if the lease is
// lost, and then the lease's loss is the error.
func (r *Runner) withLease(ctx context.Context, tenant, userID string, fn func(ctx context.Context) error) error {
	runCtx, ls, err := r.leases.acquire(ctx, namespaceKey(tenant, userID))
	if err != nil {
		return err
	}
	err = fn(runCtx)
	if lost := ls.release(ctx); lost != nil {
		return lost
	}
	return err
}

// namespaceState is the value of a namespace in the state bucket.
type namespaceState struct {
	// LastRun is when the last complete run started.
	LastRun time.Time `json:"last_run"`
	// Watermark is the latest episode time given to the semantic writer.
	Watermark time.Time `json:"watermark"`
}

func (r *Runner) loadState(ctx context.Context, tenant, userID string) (namespaceState, error) {
	var st namespaceState
	e, err := r.state.Get(ctx, namespaceKey(tenant, userID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("consolidate: read state of %s/%s: %w", tenant, userID, err)
	}
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		// A damaged state only costs a full semantic pass; say so and start over.
		r.logger.Warn("unreadable consolidation state; starting from scratch", obs.Tenant(tenant), obs.User(userID), zap.Error(err))
		return namespaceState{}, nil
	}
	return st, nil
}

func (r *Runner) saveState(ctx context.Context, tenant, userID string, st namespaceState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := r.state.Put(ctx, namespaceKey(tenant, userID), data); err != nil {
		return fmt.Errorf("consolidate: write state of %s/%s: %w", tenant, userID, err)
	}
	return nil
}

// LastRun is when the namespace's last complete consolidation started; the zero
// time if it never ran.
func (r *Runner) LastRun(ctx context.Context, tenant, userID string) (time.Time, error) {
	if err := validateNamespace(tenant, userID); err != nil {
		return time.Time{}, err
	}
	st, err := r.loadState(ctx, tenant, userID)
	return st.LastRun, err
}

// Consolidate runs one consolidation of the namespace (see the package doc for
// the steps) and returns what it did. It fails with ErrLeaseHeld at once when
// another run holds the namespace. On an error the counts say what was done
// before it; the next run picks up from there.
func (r *Runner) Consolidate(ctx context.Context, tenant, userID string) (events.ConsolidateReply, error) {
	var reply events.ConsolidateReply
	if err := validateNamespace(tenant, userID); err != nil {
		return reply, err
	}
	err := r.withLease(ctx, tenant, userID, func(ctx context.Context) error {
		return r.consolidate(ctx, tenant, userID, &reply)
	})
	return reply, err
}

func (r *Runner) consolidate(ctx context.Context, tenant, userID string, reply *events.ConsolidateReply) error {
	start := r.deps.Now().UTC()
	log := r.logger.With(obs.Tenant(tenant), obs.User(userID))
	st, err := r.loadState(ctx, tenant, userID)
	if err != nil {
		return err
	}
	if reply.ExpiredSwept, err = r.deps.Sweeper.SweepExpired(ctx, tenant, userID); err != nil {
		return fmt.Errorf("consolidate: sweep expired items of %s/%s: %w", tenant, userID, err)
	}
	if reply.SemanticWritten, st.Watermark, err = r.writeFacts(ctx, tenant, userID, st.Watermark); err != nil {
		return err
	}
	if reply.Merged, reply.Separated, err = r.mergeAndSeparate(ctx, tenant, userID); err != nil {
		return err
	}
	st.LastRun = start
	if err := r.saveState(ctx, tenant, userID, st); err != nil {
		return err
	}
	log.Info("consolidation run done", zap.Int("expired_swept", reply.ExpiredSwept),
		zap.Int("semantic_written", reply.SemanticWritten), zap.Int("merged", reply.Merged),
		zap.Int("separated", reply.Separated), zap.Duration("took", r.deps.Now().Sub(start)))
	return nil
}

// scroll reads every record matching f.
func (r *Runner) scroll(ctx context.Context, f vectorstore.Filter) ([]vectorstore.Record, error) {
	var all []vectorstore.Record
	offset := ""
	for {
		page, next, err := r.deps.Vectors.Scroll(ctx, f, offset, DefaultPageSize)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		offset = next
	}
}

// appendHistory records changes for memory id. History follows the change it
// describes, so a failure is logged and not retried (see the package doc).
func (r *Runner) appendHistory(ctx context.Context, tenant, userID, id string, changes ...events.Change) {
	if err := r.deps.History.Append(ctx, tenant, userID, id, changes...); err != nil {
		ops := make([]string, len(changes))
		for i, ch := range changes {
			ops[i] = ch.Op
		}
		r.logger.Warn("could not record memory history", obs.Tenant(tenant), obs.User(userID),
			obs.MemoryID(id), zap.Strings("ops", ops), zap.Error(err))
	}
}
