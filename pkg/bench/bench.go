// Package bench measures agentmem as deployed by `agentmem up`: the whole stack
// (embedded nats-server with a loopback TCP listener, the four components, the
// embedded vector store, the filesystem Markdown store) in this process, with the
// measuring clients connected over TCP like any agent.
//
// What it measures, in order (each phase starts once the pipeline is idle, so one
// phase's background work does not slow the next):
//
//   - load: Memories vector memories spread over Users users of one tenant,
//     written straight into the vector store (the pipeline would take too long),
//     built like ingest and the consolidator build them (episodic records from the
//     write decider with provenance, semantic facts); the asked user also gets a
//     200-line MEMORY.md, both topic files and an open session;
//   - latency: a bare NATS micro echo round trip and a context request through
//     the retriever, interleaved on one connection with the same request bytes, p50
//     and p99 of each and the ratio of the p99s;
//   - throughput: raw JetStream (async publish of observation-sized messages into
//     a separate stream, one durable pull consumer acking) against the ingest
//     pipeline (observations in, episodic memories stored), and extraction
//     (session_ended in, Markdown entries and facts out, offline extractor);
//   - fleet (unless Agents is 0): Agents agents, each on its own connection,
//     over the loaded users, every user handed over from one agent to the next,
//     publishing observations and timing context requests with their agent_id
//     all at once;
//   - memory: peak RSS of the process and on-disk bytes per stored memory;
//   - restart: the stack closed and started again on its data directory, the
//     time until it answers a context request and the first requests' latency;
//   - remote models (unless SkipRemote), on a second stack once the first is
//     closed: the same context, ingest and extraction phases with an
//     OpenAI-compatible chat model and embedder answering with a set latency.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/config"
)

// Defaults: the 100,000 memories over 1,000 users; the other sizes are
// chosen so that a default run finishes in under 3 minutes on 2 cores.
//
// DefaultIngestMessages is large enough for both throughput phases to reach their
// steady rate: with 10,000 the raw phase lasted ~0.3 s and paid its start-up in
// full (~15% more CPU per message than over 40,000), while ingest ended before its
// first WAL checkpoints, which flattered their ratio by about a third.
const (
	DefaultMemories       = 100_000
	DefaultUsers          = 1_000
	DefaultRequests       = 1_000
	DefaultIngestMessages = 40_000
	DefaultSessions       = 200
)

// Sentinel errors.
var (
	// ErrInvalidConfig: Run was given a Config that cannot work; the message names the field.
	ErrInvalidConfig = errors.New("bench: invalid config")
	// ErrMeasurement: a phase did not do what it measures (a request failed, a
	// memory was not stored); its number would be meaningless.
	ErrMeasurement = errors.New("bench: measurement failed")
)

// Config sizes a run. Zero fields take the defaults.
type Config struct {
	// Memories stored before the latency phase; default DefaultMemories.
	Memories int
	// Users the memories are spread over; default DefaultUsers, fewer when
	// Memories is small, so that the asked user holds DefaultMemories/DefaultUsers
	// memories (a pack recalls only memories related to its query, and a user
	// with two memories often has none).
	Users int
	// Requests is how many context requests (and as many echo requests) are
	// timed, after a warm-up of a tenth of them; default DefaultRequests.
	Requests int
	// IngestMessages is how many messages the raw JetStream and the ingest
	// throughput phases each publish; default DefaultIngestMessages.
	IngestMessages int
	// Sessions is how many sessions the extraction phase ends; default DefaultSessions.
	Sessions int
	// ConfigFile and Environ are the agentmem configuration (a YAML file, AGENTMEM_*
	// variables) the stack is built from, so that a run measures its tuning (worker
	// concurrency, batch sizes, the embedder); storage and listeners are always the
	// run's own (config.Sandbox), and the vector store is the embedded one.
	ConfigFile string
	Environ    []string
	// DataDir holds the stack's data; default a temporary directory, removed
	// afterwards.
	DataDir string
	// Progress receives progress lines while the run loads and measures (a line
	// rewritten with \r on a terminal); nil discards them.
	Progress io.Writer
	// ProfileDir, when set, is created if missing and receives a CPU profile of
	// each phase (load.pprof, latency.pprof, raw.pprof, ingest.pprof,
	// extraction.pprof): a whole-run profile mixes what limits one figure with the
	// others' work.
	ProfileDir string
	// Curve adds the cost curve phase (after the latency phase): context latency
	// for one namespace of each of CurveSizes memories (~111,000 more memories
	// loaded, so peak RSS rises with it).
	Curve bool
	// CurveSizes replaces CurveSizes as the curve's namespace sizes (tests).
	CurveSizes []int
	// SkipRemote leaves out the remote-model phase.
	SkipRemote bool
	// Agents is how many agents the fleet phase runs at once (issue 31); zero
	// leaves the phase out (the command's --agents defaults to DefaultAgents).
	Agents int
	// AgentTurn is how often each agent of the fleet phase takes a turn (an
	// observation and a context request); default DefaultAgentTurn. An agent's
	// turn includes its model's answer, seconds in practice: agents that fire
	// back to back measure the stack's queue at saturation, not a request.
	AgentTurn time.Duration
	// RemoteEmbedLatency and RemoteChatLatency are how long the remote phase's
	// embeddings and chat-completions requests take; defaults
	// DefaultRemoteEmbedLatency and DefaultRemoteChatLatency.
	RemoteEmbedLatency, RemoteChatLatency time.Duration
	// RemoteObservations is how many observations the remote phase's ingest
	// measurement publishes; default DefaultRemoteObservations.
	RemoteObservations int
}

func (c *Config) setDefaults() {
	if c.Memories == 0 {
		c.Memories = DefaultMemories
	}
	if c.Users == 0 {
		c.Users = max(1, min(DefaultUsers, c.Memories*DefaultUsers/DefaultMemories))
	}
	if c.Requests == 0 {
		c.Requests = DefaultRequests
	}
	if c.IngestMessages == 0 {
		c.IngestMessages = DefaultIngestMessages
	}
	if c.Sessions == 0 {
		c.Sessions = DefaultSessions
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	c.RemoteEmbedLatency = cmp.Or(c.RemoteEmbedLatency, DefaultRemoteEmbedLatency)
	c.RemoteChatLatency = cmp.Or(c.RemoteChatLatency, DefaultRemoteChatLatency)
	c.RemoteObservations = cmp.Or(c.RemoteObservations, DefaultRemoteObservations)
	c.AgentTurn = cmp.Or(c.AgentTurn, DefaultAgentTurn)
}

// Validate reports what is wrong with c after defaults are applied.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"Memories", c.Memories}, {"Users", c.Users}, {"Requests", c.Requests}, {"IngestMessages", c.IngestMessages}, {"Sessions", c.Sessions}, {"RemoteObservations", c.RemoteObservations}, {"Agents", c.Agents}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s is %d, want > 0", f.name, f.v))
		}
	}
	if c.AgentTurn < 0 {
		errs = append(errs, fmt.Errorf("AgentTurn is %s, want > 0", c.AgentTurn))
	}
	if c.RemoteEmbedLatency < 0 || c.RemoteChatLatency < 0 {
		errs = append(errs, fmt.Errorf("RemoteEmbedLatency %s and RemoteChatLatency %s must not be negative", c.RemoteEmbedLatency, c.RemoteChatLatency))
	}
	if c.Users > c.Memories {
		errs = append(errs, fmt.Errorf("Users is %d, more than Memories (%d): every user needs a memory", c.Users, c.Memories))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Result is what a run measured. The JSON names of the first fields are the
// contract of `agentmem bench --json`; more may follow, none is renamed.
type Result struct {
	Memories        int     `json:"memories"`
	NATSRRP50us     float64 `json:"nats_rr_p50_us"`
	NATSRRP99us     float64 `json:"nats_rr_p99_us"`
	CtxP50us        float64 `json:"ctx_p50_us"`
	CtxP99us        float64 `json:"ctx_p99_us"`
	CtxVsNATSP99    float64 `json:"ctx_vs_nats_p99"`
	RawJSMsgsPerS   float64 `json:"raw_js_msgs_per_s"`
	IngestMsgsPerS  float64 `json:"ingest_msgs_per_s"`
	IngestVsRaw     float64 `json:"ingest_vs_raw"`
	RSSMB           float64 `json:"rss_mb"`
	ExtractSessPerS float64 `json:"extract_sessions_per_s"`
	BytesPerMemory  float64 `json:"bytes_per_memory"`

	Users          int     `json:"users"`
	Requests       int     `json:"requests"`
	CtxAvgTokens   float64 `json:"ctx_avg_tokens"`    // the packs' token estimate, to show the requests did real work
	CtxDecodeP50us float64 `json:"ctx_decode_p50_us"` // decoding a pack in the client, outside ctx_p50_us
	// The timed context requests whose query was not asked before in the run (its
	// embedding not cached), and their p50/p99.
	CtxNewQueries    int     `json:"ctx_new_queries"`
	CtxNewQueryP50us float64 `json:"ctx_new_query_p50_us"`
	CtxNewQueryP99us float64 `json:"ctx_new_query_p99_us"`
	IngestMessages   int     `json:"ingest_messages"`
	// The process's CPU time per message of the raw and ingest phases (publisher
	// included in both; absent where the system does not say): steadier than the
	// throughputs on a shared machine, where other load takes wall time.
	RawCPUusPerMsg    float64 `json:"raw_cpu_us_per_msg,omitempty"`
	IngestCPUusPerMsg float64 `json:"ingest_cpu_us_per_msg,omitempty"`
	IngestStored      int     `json:"ingest_stored"` // episodic memories the ingest phase stored
	Sessions          int     `json:"extract_sessions"`
	ExtractEntries    int     `json:"extract_entries"` // Markdown entries the extraction phase wrote
	// With a model configured (llm.base_url): its calls (agentmem_llm_calls_total,
	// every step and outcome) per observation of the ingest phase, and per session of
	// the extraction phase, the ingest of its messages included and, apart, the
	// extractor's alone.
	ModelCallsPerObservation      float64 `json:"model_calls_per_observation,omitempty"`
	ModelCallsPerSession          float64 `json:"model_calls_per_session,omitempty"`
	ModelExtractorCallsPerSession float64 `json:"model_extractor_calls_per_session,omitempty"`
	// Context requests answered while ingest drained a backlog of IngestMessages
	// observations, and their p50/p99; CtxBacklogVsIdleP99 is that p99 over the
	// latency phase's (idle) ctx_p99_us.
	BacklogRequests     int     `json:"backlog_requests"`
	CtxBacklogP50us     float64 `json:"ctx_backlog_p50_us"`
	CtxBacklogP99us     float64 `json:"ctx_backlog_p99_us"`
	CtxBacklogVsIdleP99 float64 `json:"ctx_backlog_vs_idle_p99"`
	// The restart phase: seconds from starting the stack again on the same data
	// to the first context pack, the next Requests requests' p50/p99, and
	// that p99 over the latency phase's ctx_p99_us.
	RestartReadyS         float64 `json:"restart_ready_s"`
	RestartCtxP50us       float64 `json:"restart_ctx_p50_us"`
	RestartCtxP99us       float64 `json:"restart_ctx_p99_us"`
	RestartCtxP99VsSteady float64 `json:"restart_ctx_p99_vs_steady"`
	VectorBytes           int64   `json:"vector_store_bytes"`
	RSSSource             string  `json:"rss_source"` // what rss_mb is: peak RSS (VmHWM, Linux), else the Go runtime's Sys
	LoadSeconds           float64 `json:"load_seconds"`
	LoadPerS              float64 `json:"load_memories_per_s"`
	TotalSeconds          float64 `json:"total_seconds"`
	GoVersion             string  `json:"go_version"`
	OS                    string  `json:"os"`
	Arch                  string  `json:"arch"`
	CPUs                  int     `json:"cpus"`
	GOMAXPROCS            int     `json:"gomaxprocs"`
	// The cost curve (Config.Curve): context p50/p99 for one namespace of each
	// of CurveSizes memories, and the p99s again as flat fields.
	Curve             []CurvePoint `json:"curve,omitempty"`
	CurveCtxP99us1k   float64      `json:"curve_ctx_p99_us_1k,omitempty"`
	CurveCtxP99us10k  float64      `json:"curve_ctx_p99_us_10k,omitempty"`
	CurveCtxP99us100k float64      `json:"curve_ctx_p99_us_100k,omitempty"`
	// The remote-model phase (absent with SkipRemote). RemoteModelLatencyMs is
	// the embedder's latency, which a context request waits for once (when its
	// query is not cached); RemoteChatLatencyMs the chat model's. The context
	// figures come from RemoteMemories memories of the asked user, embedded
	// remotely, their target being the model's latency plus 5x the bare round
	// trip's p99 of the same phase (RemoteNATSRRP99us).
	LLMIngestObsPerS        float64 `json:"llm_ingest_obs_per_s,omitempty"`
	RemoteCtxP50us          float64 `json:"remote_ctx_p50_us,omitempty"`
	RemoteCtxP99us          float64 `json:"remote_ctx_p99_us,omitempty"`
	RemoteModelLatencyMs    float64 `json:"remote_model_latency_ms,omitempty"`
	RemoteChatLatencyMs     float64 `json:"remote_chat_latency_ms,omitempty"`
	RemoteCtxP99OverModelUs float64 `json:"remote_ctx_p99_minus_model_us,omitempty"`
	// The requests whose query was new (each waited for the embedder), and their
	// p50 over the model's latency: what the rest of a request costs.
	RemoteCtxNewQueries             int     `json:"remote_ctx_new_queries,omitempty"`
	RemoteCtxNewQueryP50us          float64 `json:"remote_ctx_new_query_p50_us,omitempty"`
	RemoteCtxNewQueryP99us          float64 `json:"remote_ctx_new_query_p99_us,omitempty"`
	RemoteCtxNewQueryP50OverModelUs float64 `json:"remote_ctx_new_query_p50_minus_model_us,omitempty"`
	RemoteNATSRRP99us               float64 `json:"remote_nats_rr_p99_us,omitempty"`
	RemoteMemories                  int     `json:"remote_memories,omitempty"`
	RemoteObservations              int     `json:"remote_observations,omitempty"`
	RemoteModelCallsPerObservation  float64 `json:"remote_model_calls_per_observation,omitempty"`
	RemoteExtractSessPerS           float64 `json:"remote_extract_sessions_per_s,omitempty"`
	RemoteModelCallsPerSession      float64 `json:"remote_model_calls_per_session,omitempty"`
	RemoteEmbedRequests             int     `json:"remote_embed_requests,omitempty"`
	// The fleet phase (absent with Agents 0): FleetAgents agents over FleetUsers
	// users publishing and asking for context at once, FleetRequests timed
	// context requests in all, their p50/p99, and that p99 over the latency
	// phase's bare round-trip p99 (nats_rr_p99_us). FleetHandovers counts the
	// packs that carried another agent's session (each user is handed over).
	// FleetTurnMs is each agent's turn (Config.AgentTurn), so the offered load
	// is FleetAgents turns per FleetTurnMs; FleetSeconds the timed part's length.
	FleetAgents       int     `json:"fleet_agents,omitempty"`
	FleetTurnMs       float64 `json:"fleet_turn_ms,omitempty"`
	FleetSeconds      float64 `json:"fleet_seconds,omitempty"`
	FleetUsers        int     `json:"fleet_users,omitempty"`
	FleetRequests     int     `json:"fleet_requests,omitempty"`
	FleetHandovers    int     `json:"fleet_handovers,omitempty"`
	FleetCtxP50us     float64 `json:"fleet_ctx_p50_us,omitempty"`
	FleetCtxP99us     float64 `json:"fleet_ctx_p99_us,omitempty"`
	FleetCtxVsNATSP99 float64 `json:"fleet_ctx_vs_nats_p99,omitempty"`
}

// profiled runs phase, writing its CPU profile to dir/name.pprof when dir is set.
func profiled(dir, name string, phase func() error) error {
	if dir == "" {
		return phase()
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		return fmt.Errorf("bench: cpu profile: %w", err)
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return fmt.Errorf("bench: cpu profile: %w", err)
	}
	err = phase()
	pprof.StopCPUProfile()
	return err
}

// Run starts a stack, measures it and stops it. cfg.Progress gets what it is doing.
func Run(ctx context.Context, cfg Config, logger *zap.Logger) (Result, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return Result{}, fmt.Errorf("profile dir: %w", err)
		}
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	began := time.Now()
	if cfg.DataDir == "" {
		tmp, err := os.MkdirTemp("", "agentmem-bench-")
		if err != nil {
			return Result{}, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(tmp)
		cfg.DataDir = tmp
	}
	b, err := newBencher(ctx, cfg, logger, nil)
	if err != nil {
		return Result{}, err
	}
	closed := false
	defer func() {
		if !closed {
			b.close()
		}
	}()

	res := Result{
		Users: cfg.Users, Requests: cfg.Requests, IngestMessages: cfg.IngestMessages, Sessions: cfg.Sessions,
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	for _, phase := range []struct {
		name string
		run  func(context.Context, *Result) error
	}{{"load", b.load}, {"latency", b.latency}, {"curve", b.curve}, {"raw", b.rawJetStream}, {"ingest", b.ingest}, {"backlog", b.backlog}, {"fleet", b.fleet}, {"extraction", b.extraction}} {
		if err := profiled(cfg.ProfileDir, phase.name, func() error { return phase.run(ctx, &res) }); err != nil {
			return Result{}, err
		}
		if err := b.idle(ctx); err != nil {
			return Result{}, err
		}
	}
	res.RSSMB, res.RSSSource = peakRSSMB()
	closed = true
	b.close()
	fmt.Fprintf(cfg.Progress, "== restarting agentmem on the same data directory\n")
	if err := profiled(cfg.ProfileDir, "restart", func() error { return restart(ctx, cfg, logger, &res) }); err != nil {
		return Result{}, err
	}
	if err := remote(ctx, cfg, logger, &res); err != nil {
		return Result{}, err
	}
	res.CtxVsNATSP99 = res.CtxP99us / res.NATSRRP99us
	res.IngestVsRaw = res.IngestMsgsPerS / res.RawJSMsgsPerS
	res.CtxBacklogVsIdleP99 = res.CtxBacklogP99us / res.CtxP99us
	if res.FleetAgents > 0 {
		res.FleetCtxVsNATSP99 = res.FleetCtxP99us / res.NATSRRP99us
	}
	res.RestartCtxP99VsSteady = res.RestartCtxP99us / res.CtxP99us
	res.TotalSeconds = time.Since(began).Seconds()
	return res, nil
}

// Tenants of the phases, so their memories never mix.
const (
	tenantLoad    = "bench"
	tenantIngest  = "bench-ingest"
	tenantExtract = "bench-extract"
	tenantBacklog = "bench-backlog"
	agentID       = "bench-agent"
)

// benchConsolidateInterval is longer than any run.
const benchConsolidateInterval = 1000 * time.Hour

// bencher is one run: the stack and the measuring connection.
type bencher struct {
	cfg    Config
	stack  *app.Stack
	rt     *app.Runtime
	nc     *nats.Conn // over TCP, like an agent
	logger *zap.Logger
}

// newBencher starts the stack on a loopback TCP listener with a free port and
// connects the measuring client to it; extra overrides the configuration more.
func newBencher(ctx context.Context, cfg Config, logger *zap.Logger, extra map[string]string) (*bencher, error) {
	overrides := config.Sandbox(cfg.DataDir)
	overrides["nats.embedded.listen"] = "127.0.0.1:0" // the client measures over TCP
	// The consolidation timer would merge the repeated facts of a phase while it
	// is counted (a slow run passes its 10 minutes): no phase measures it.
	overrides["vector.consolidate_interval"] = benchConsolidateInterval.String()
	maps.Copy(overrides, extra)
	stackCfg, err := config.Load(cfg.ConfigFile, config.WithOverrides(cfg.Environ, overrides))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	fmt.Fprintf(cfg.Progress, "== starting agentmem (embedded NATS on loopback TCP) in %s\n", cfg.DataDir)
	stack, err := app.Up(ctx, stackCfg, app.UpOptions{}, logger)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(stack.ClientURL(), nats.Name("agentmem-bench"))
	if err != nil {
		_ = stack.Close()
		return nil, fmt.Errorf("bench: connect to %s: %w", stack.ClientURL(), err)
	}
	return &bencher{cfg: cfg, stack: stack, rt: stack.Runtime(), nc: nc, logger: logger}, nil
}

func (b *bencher) close() {
	b.nc.Close()
	if err := b.stack.Close(); err != nil {
		b.logger.Warn("stack stopped with an error", zap.Error(err))
	}
}

// idle waits until the workers have handled everything published so far (the
// consolidator's memory_hit and memory_written backlog included), and says how
// long that took: it is part of a run's time but of no measurement.
func (b *bencher) idle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	began := time.Now()
	if err := app.WaitIdle(ctx, b.rt.JS, 20*time.Millisecond); err != nil {
		return err
	}
	fmt.Fprintf(b.cfg.Progress, "   pipeline idle after %.1fs\n", time.Since(began).Seconds())
	return nil
}

// vectorFiles is the on-disk size of the embedded vector store: the SQLite file
// and its write-ahead log (empty after a Checkpoint).
func vectorFiles(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
