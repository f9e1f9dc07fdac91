package app

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/pipeline"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/retrieve"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/transfer"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/writes"
)

// processors are the LLM-driven steps: the LLM implementations when an endpoint is
// configured, the offline rule-based ones otherwise (docs/architecture.md "Models").
type processors struct {
	extractor      extract.Extractor
	decider        processor.WriteDecider
	semantic       processor.SemanticWriter
	merger         processor.Merger
	separator      processor.Separator
	reconsolidator processor.Reconsolidator
}

// processors are the process's one set of processors, shared by its components.
func (rt *Runtime) processors() (processors, error) {
	if rt.procs != nil {
		return *rt.procs, nil
	}
	p, err := rt.newProcessors()
	if err != nil {
		return p, err
	}
	rt.procs = &p
	return p, nil
}

func (rt *Runtime) newProcessors() (processors, error) {
	if rt.LLM == nil {
		return processors{
			extractor:      extract.NewRules(rt.Logger),
			decider:        processor.NewRuleDecider(),
			semantic:       processor.NewRuleSemanticWriter(),
			merger:         processor.NewRuleMerger(),
			separator:      processor.NewRuleSeparator(),
			reconsolidator: processor.NewRuleReconsolidator(),
		}, nil
	}
	lc := processor.LLMConfig{Client: rt.LLM, DecideBatchSize: rt.Config.LLM.DecideBatchSize}
	p := processors{extractor: extract.NewLLM(rt.LLM, rt.Logger)}
	decider, err := processor.NewLLMDecider(lc, rt.Logger)
	if err != nil {
		return p, err
	}
	p.decider = processor.NewFallbackDecider(decider, rt.Logger)
	if p.semantic, err = processor.NewLLMSemanticWriter(lc, rt.Logger); err != nil {
		return p, err
	}
	if p.merger, err = processor.NewLLMMerger(lc, rt.Logger); err != nil {
		return p, err
	}
	if p.separator, err = processor.NewLLMSeparator(lc, rt.Logger); err != nil {
		return p, err
	}
	p.reconsolidator, err = processor.NewLLMReconsolidator(lc, rt.Logger)
	return p, err
}

// extractBudgetMessages is the session size the extractor's Router timeout is
// derived for: a longer session may need more than one attempt, each resuming
// after the chunks the previous ones extracted.
const extractBudgetMessages = 1000

// modelBudget is how the handler deadlines derive from the model, the work and
// the concurrency (docs/operations.md "Model throughput"). Zero when offline: the
// routers' default timeouts apply.
type modelBudget struct {
	timeout     time.Duration // one attempt of one call (llm.timeout)
	call        time.Duration // one call with all its retries and backoff
	concurrency int           // calls in flight from the process (llm.concurrency)
}

func (rt *Runtime) modelBudget() modelBudget {
	if rt.LLM == nil {
		return modelBudget{}
	}
	c := rt.LLM.Config()
	return modelBudget{timeout: c.Timeout, call: c.CallBudget(), concurrency: c.Concurrency}
}

// waves is how long n calls take, concurrency at a time, each answering within
// the timeout.
func (b modelBudget) waves(n int) time.Duration {
	if b.concurrency <= 0 {
		return 0
	}
	return time.Duration((n+b.concurrency-1)/b.concurrency) * b.timeout
}

// ingestTimeout bounds one attempt of an ingest batch: a batch's decisions wait
// behind those of every observation in flight (ingest.concurrency of them, the
// model client serving llm.concurrency at a time), plus one call's retries and a
// margin for the state, embedding and store round trips. Zero when offline.
func (rt *Runtime) ingestTimeout() time.Duration {
	b := rt.modelBudget()
	if b.timeout == 0 {
		return 0
	}
	return b.waves(rt.ingestInFlight()) + b.call + 15*time.Second
}

// ingestInFlight is how many observations ingest holds at once (its default when
// unset: four batches).
func (rt *Runtime) ingestInFlight() int {
	in := rt.Config.Ingest
	if in.Concurrency > 0 {
		return in.Concurrency
	}
	return 4 * max(in.BatchSize, 128)
}

// extractorConfig is the extractor's configuration: with a model, long sessions
// are cut into chunks asked concurrently, llm.concurrency sessions are handled at
// once, ingest's write decisions are reused, and
// each attempt's deadline derives from its session (extract.WorkerConfig.AttemptBudget).
func (rt *Runtime) extractorConfig() extract.WorkerConfig {
	cfg := extract.WorkerConfig{
		Consumer: bus.WorkerConsumer(bus.WorkerExtractor, rt.consumerDefaults()),
		Router:   bus.RouterConfig{Gate: rt.gate()},
		Limits:   rt.Config.Limits.Events(),
		// Also with a model: agentLessons filters what either extracted.
		AgentLearning: rt.Config.Memory.AgentLearning,
	}
	b := rt.modelBudget()
	if b.timeout == 0 {
		return cfg
	}
	cfg.ChunkMessages = extract.DefaultChunkMessages
	cfg.ModelConcurrency = b.concurrency
	// A session spends its time waiting for model round trips: as many sessions
	// at once as calls in flight (the default 4 kept a 300 ms model to ~10
	// sessions/s); the model client still bounds the calls.
	cfg.Concurrency = b.concurrency
	cfg.CallTimeout, cfg.CallBudget = b.timeout, b.call
	cfg.Ingest = extract.IngestReuse{
		Durable: bus.WorkerConsumer(bus.WorkerIngest, rt.consumerDefaults()).Durable,
		// As long as ingest needs to work through what it holds when every call
		// answers in time; the chunks are asked meanwhile.
		Wait: b.waves(rt.ingestInFlight()),
	}
	cfg.Router.HandlerTimeout = cfg.AttemptBudget(extractBudgetMessages)
	return cfg
}

// consumerDefaults are the configuration's durable consumer settings.
func (rt *Runtime) consumerDefaults() bus.ConsumerDefaults {
	c := rt.Config.NATS.Consumer
	return bus.ConsumerDefaults{AckWait: c.AckWait, MaxDeliver: c.MaxDeliver, BackOff: c.Backoff}
}

// componentParts are what Component prepares for every component: the processors,
// the component's metrics and its logger.
type componentParts struct {
	procs   processors
	metrics *obs.Metrics
	logger  *zap.Logger
}

// registryEntry is a component's name and constructor.
type registryEntry struct {
	name  string
	build func(rt *Runtime, ctx context.Context, p componentParts) (Component, error)
}

// registry is every component, in start order: adding a component is one entry here
// (and its name constant); Components is derived from it.
var registry = []registryEntry{
	{Ingest, (*Runtime).ingest},
	{Extractor, (*Runtime).extractor},
	{Consolidator, (*Runtime).consolidator},
	{Retriever, (*Runtime).retriever},
}

// componentNames lists the registry's names, in its order.
func componentNames() []string {
	names := make([]string, len(registry))
	for i, r := range registry {
		names[i] = r.name
	}
	return names
}

// Component builds one component by name on the runtime.
func (rt *Runtime) Component(ctx context.Context, name string) (Component, error) {
	i := slices.IndexFunc(registry, func(r registryEntry) bool { return r.name == name })
	if i < 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownComponent, name)
	}
	procs, err := rt.processors()
	if err != nil {
		return nil, err
	}
	metrics, err := obs.NewMetrics(rt.Registry, name)
	if err != nil {
		return nil, err
	}
	if slices.Contains(streamWorkers, name) {
		metrics.ExportDeadLetterReasons(bus.ReasonClasses...)
		if err := registerBacklog(rt.Registry, rt.JS, name, rt.Logger); err != nil {
			return nil, err
		}
	}
	// The one place the worker field is added: the packages below log with the
	// logger they are given, and rt.Logger is the process's (RunWorker's too).
	logger := rt.Logger.With(obs.Worker(name))
	return registry[i].build(rt, ctx, componentParts{procs: procs, metrics: metrics, logger: logger})
}

func (rt *Runtime) ingest(_ context.Context, p componentParts) (Component, error) {
	in := rt.Config.Ingest
	policies, err := rt.sessionPolicies()
	if err != nil {
		return nil, err
	}
	meter, err := rt.quotaMeter()
	if err != nil {
		return nil, err
	}
	return ingest.New(ingest.Config{
		Consumer:        bus.WorkerConsumer(bus.WorkerIngest, rt.consumerDefaults()),
		Concurrency:     in.Concurrency,
		Batch:           pipeline.BatchConfig{MaxSize: in.BatchSize, Linger: in.BatchLinger},
		ContextMessages: in.ContextMessages,
		Limits:          rt.Config.Limits.Events(),
		Router:          bus.RouterConfig{HandlerTimeout: rt.ingestTimeout(), Gate: rt.gate()},
		// The model client bounds the calls in flight; a batch asks them all at once.
		DecideConcurrency: rt.modelBudget().concurrency,
		Summary:           rt.summaryTrigger(),
	}, ingest.Deps{
		Dial: rt.Dial, JS: rt.JS, Events: rt.Events, Sessions: rt.Sessions,
		Decider: p.procs.decider, Vectors: rt.Vectors, Embedder: rt.Embedder, Metrics: p.metrics, Gate: rt.Priority,
		Policy: func(ctx context.Context, tenant, user, session string) policy.Policy {
			return policies.For(ctx, docstore.Namespace{Tenant: tenant, User: user}, session)
		},
		Rate: rt.quotaRate(), Memories: meter,
	}, p.logger)
}

func (rt *Runtime) extractor(_ context.Context, p componentParts) (Component, error) {
	summaries, err := rt.sessionSummaries(p.logger)
	if err != nil {
		return nil, err
	}
	evolver, err := rt.evolver(p.logger)
	if err != nil {
		return nil, err
	}
	meter, err := rt.quotaMeter()
	if err != nil {
		return nil, err
	}
	return extract.NewWorker(rt.extractorConfig(), extract.WorkerDeps{
		Dial: rt.Dial, JS: rt.JS, Events: rt.Events, Docs: rt.Docs, Extractor: p.procs.extractor,
		Decider: p.procs.decider, Semantic: p.procs.semantic, Vectors: rt.Vectors, Embedder: rt.Embedder, Metrics: p.metrics,
		Summaries: summaries, Evolver: evolver, Keyring: rt.Keyring, Quota: meter,
	}, p.logger)
}

// sessionPolicies is the process's per-session policy (SPEC B5), shared by
// ingest's summary trigger and the extractor's summaries.
func (rt *Runtime) sessionPolicies() (*lifecycle.Policies, error) {
	if rt.policies == nil {
		p, err := lifecycle.NewPolicies(rt.Config.Memory.Policy, rt.Docs, 4096, rt.Logger)
		if err != nil {
			return nil, err
		}
		rt.policies = p
	}
	return rt.policies, nil
}

// evolver is the extractor's policy evolution (SPEC B5); it reflects only in
// namespaces whose policy has evolution_enabled: the model when one is
// configured, the rules otherwise.
func (rt *Runtime) evolver(logger *zap.Logger) (*lifecycle.Evolver, error) {
	metrics, err := rt.lifecycleMetrics()
	if err != nil {
		return nil, err
	}
	var model lifecycle.Reflector
	if rt.LLM != nil {
		model = lifecycle.LLMReflector{Client: rt.LLM}
	}
	return lifecycle.NewEvolver(lifecycle.EvolverConfig{Base: rt.Config.Memory.Policy}, rt.Docs, rt.Sessions, model, metrics, logger)
}

// summaryTrigger is when ingest announces a session's summary (SPEC B2), from
// the memory block's policy.
func (rt *Runtime) summaryTrigger() session.SummaryTrigger {
	m := rt.Config.Memory
	return session.SummaryTrigger{
		MessageThreshold:    m.SessionSummaryMessageThreshold,
		TokenPercent:        m.SessionSummaryTokenPercent,
		ContextWindowTokens: m.ContextWindowTokens,
		KeepCount:           m.SessionSummaryKeepCount,
	}
}

// sessionSummaries is the extractor's session summariser (SPEC B2): the model
// when one is configured, the extractive rules otherwise.
func (rt *Runtime) sessionSummaries(logger *zap.Logger) (*lifecycle.SessionSummaries, error) {
	metrics, err := rt.lifecycleMetrics()
	if err != nil {
		return nil, err
	}
	var model lifecycle.SessionSummarizer
	if rt.LLM != nil {
		model = lifecycle.LLMSessionSummarizer{Client: rt.LLM}
	}
	policies, err := rt.sessionPolicies()
	if err != nil {
		return nil, err
	}
	m := rt.Config.Memory
	return lifecycle.NewSessionSummaries(lifecycle.SessionSummaryConfig{
		KeepCount:           m.SessionSummaryKeepCount,
		ContextWindowTokens: m.ContextWindowTokens,
		Policies:            policies,
	}, rt.Sessions, model, metrics, logger)
}

func (rt *Runtime) consolidator(ctx context.Context, p componentParts) (Component, error) {
	runner, err := rt.runner(ctx, p.procs)
	if err != nil {
		return nil, err
	}
	compactor, err := rt.compactor()
	if err != nil {
		return nil, err
	}
	return consolidate.NewWorker(consolidate.WorkerConfig{
		Consumer: bus.WorkerConsumer(bus.WorkerConsolidator, rt.consumerDefaults()),
		Router:   bus.RouterConfig{Gate: rt.gate()},
		Limits:   rt.Config.Limits.Events(),
		Interval: rt.Config.Vector.ConsolidateInterval,
	}, consolidate.WorkerDeps{Dial: rt.Dial, JS: rt.JS, Runner: runner, Metrics: p.metrics, Compactor: compactor}, p.logger)
}

func (rt *Runtime) retriever(ctx context.Context, p componentParts) (Component, error) {
	mem, err := rt.memories(ctx)
	if err != nil {
		return nil, err
	}
	runner, err := rt.runner(ctx, p.procs)
	if err != nil {
		return nil, err
	}
	conn, err := rt.Dial("agentmem-retriever")
	if err != nil {
		return nil, err
	}
	rt.onClose(func() error { conn.Close(); return nil })
	compactor, err := rt.compactor()
	if err != nil {
		return nil, err
	}
	moves, err := rt.transfer(conn)
	if err != nil {
		return nil, err
	}
	rpcMetrics, err := obs.NewRPCMetrics(rt.Registry)
	if err != nil {
		return nil, err
	}
	meter, err := rt.quotaMeter()
	if err != nil {
		return nil, err
	}
	m := rt.Config.Memory
	svc, err := retrieve.New(retrieve.Config{
		Policy:        m.Policy,
		AutoLoadLines: m.AutoLoadLines,
		MaxTokens:     m.ContextBudget(),
		KEpisodic:     rt.Config.Vector.KEpisodic,
		KSemantic:     rt.Config.Vector.KSemantic,
		MaxTextBytes:  rt.Config.Limits.MaxTextBytes,
		MinScore:      rt.Config.Search.MinScore,

		ContextWindowTokens: m.ContextWindowTokens,
		RemoteEmbedder:      rt.Config.Embed.Provider == config.EmbedProviderOpenAI,
	}, retrieve.Deps{
		Conn: conn, JS: rt.JS, Docs: rt.Docs, Events: rt.Events, Sessions: rt.Sessions,
		Memories: mem, Consolidator: runner, Compressor: compactor, Transfer: moves, Summarize: extract.SummarizeSession, Gate: rt.Priority,
		Metrics: rpcMetrics, Quota: meter,
	}, p.logger)
	if err != nil {
		return nil, err
	}
	return rt.withBackup(svc, conn, p.logger)
}

// transfer serves export, import and forget over the runtime's stores; its
// pages fit the retriever connection's max_payload with room for the JSON
// around them.
func (rt *Runtime) transfer(conn *nats.Conn) (*transfer.Service, error) {
	return transfer.New(transfer.Config{
		PageBytes: int(conn.MaxPayload()) * 7 / 10,
		// The workers' per-namespace state, keyed "<tenant>.<user>[.…]".
		WorkerBuckets: []string{extract.DefaultStateBucket, consolidate.DefaultStateBucket, consolidate.DefaultNamespacesBucket, consolidate.DefaultLeaseBucket},
	}, transfer.Deps{JS: rt.JS, Docs: rt.Docs, Vectors: rt.Vectors, Embedder: rt.Embedder, Sessions: rt.Sessions, Events: rt.Events, Keyring: rt.Keyring,
		ForgetLearned: func(ctx context.Context, tenant, user string) (int, error) {
			return extract.ForgetLearnedFrom(ctx, rt.JS, rt.Keyring, "", tenant, user)
		},
	}, rt.Logger)
}

// Writes is the applier of write events over the runtime's stores, as the
// retriever applies them live: for replay and rebuild.
func (rt *Runtime) Writes(ctx context.Context) (*writes.Applier, error) {
	mem, err := rt.memories(ctx)
	if err != nil {
		return nil, err
	}
	compactor, err := rt.compactor()
	if err != nil {
		return nil, err
	}
	moves, err := rt.transfer(rt.Conn)
	if err != nil {
		return nil, err
	}
	procs, err := rt.processors()
	if err != nil {
		return nil, err
	}
	runner, err := rt.runner(ctx, procs)
	if err != nil {
		return nil, err
	}
	return writes.New(writes.Deps{Docs: rt.Docs, Sessions: rt.Sessions, Memories: mem, Compressor: compactor, Importer: moves, Consolidator: runner, Policy: rt.Config.Memory.Policy})
}

// rankMode is the search the recall starts from with embedder e: BM25 alone for
// a lexical embedder, the hybrid search for a semantic one (config.Embed.Lexical).
func rankMode(e config.Embed) vectorstore.Mode {
	if e.Lexical() {
		return vectorstore.Sparse
	}
	return vectorstore.Hybrid
}

// memories is the process's one memory service (the retriever and the consolidator's
// history share it).
func (rt *Runtime) memories(ctx context.Context) (*memory.Service, error) {
	if rt.mem != nil {
		return rt.mem, nil
	}
	mc := memory.Config{
		KEpisodic: rt.Config.Vector.KEpisodic, KSemantic: rt.Config.Vector.KSemantic,
		QueryCacheSize: rt.Config.Embed.QueryCacheSize,
		Expansion:      memory.ExpansionConfig{Enabled: rt.Config.Vector.SemanticExpansion},
		Rerank:         memory.RerankConfig{Enabled: rt.Config.Vector.SemanticRerank},
		Rank:           memory.RankConfig{Fusion: memory.Fusion(rt.Config.Vector.Fusion)},
	}
	mc.Rank.Mode = rankMode(rt.Config.Embed)
	mem, err := memory.New(ctx, mc, memory.Deps{Vectors: rt.Vectors, Embedder: rt.Embedder, JS: rt.JS}, rt.Logger)
	if err != nil {
		return nil, err
	}
	rt.mem = mem
	return mem, nil
}

// runner is the process's one consolidation runner, shared by the consolidator and
// the retriever's consolidate endpoint; the namespace lease keeps runs exclusive
// across processes too.
func (rt *Runtime) runner(ctx context.Context, procs processors) (*consolidate.Runner, error) {
	if rt.run != nil {
		return rt.run, nil
	}
	mem, err := rt.memories(ctx)
	if err != nil {
		return nil, err
	}
	v := rt.Config.Vector
	run, err := consolidate.NewRunner(ctx, consolidate.RunnerConfig{
		Thresholds: consolidate.Thresholds{Merge: v.MergeThreshold, Separate: v.SeparateThreshold, SameChatWindow: v.SameChatWindow, CrossChatWindow: v.CrossChatWindow},
	}, consolidate.RunnerDeps{
		JS: rt.JS, Vectors: rt.Vectors, Embedder: rt.Embedder,
		Merger: procs.merger, Separator: procs.separator, Semantic: procs.semantic, Reconsolidator: procs.reconsolidator,
		History: mem.Log(), Sweeper: mem, Metrics: rt.Registry,
	}, rt.Logger)
	if err != nil {
		return nil, err
	}
	rt.run = run
	return run, nil
}

// lifecycleMetrics are the process's one set of lifecycle counters.
func (rt *Runtime) lifecycleMetrics() (*lifecycle.Metrics, error) {
	if rt.lcMetrics == nil {
		m, err := lifecycle.NewMetrics(rt.Registry)
		if err != nil {
			return nil, err
		}
		rt.lcMetrics = m
	}
	return rt.lcMetrics, nil
}

// compactor is the process's long-term compression (SPEC B4), shared by the
// consolidator (after Markdown writes) and the retriever's compress endpoint.
func (rt *Runtime) compactor() (*lifecycle.Compactor, error) {
	if rt.compact != nil {
		return rt.compact, nil
	}
	metrics, err := rt.lifecycleMetrics()
	if err != nil {
		return nil, err
	}
	var model lifecycle.Compressor
	if rt.LLM != nil {
		model = lifecycle.LLMCompressor{Client: rt.LLM}
	}
	m := rt.Config.Memory
	c, err := lifecycle.NewCompactor(lifecycle.CompactorConfig{
		Policy: m.Policy,
		Guard:  lifecycle.GuardConfig{MaxLossPercent: m.CompressMaxTokenLoss},
	}, rt.Docs, model, metrics, rt.Logger)
	if err != nil {
		return nil, err
	}
	rt.compact = c
	return c, nil
}
