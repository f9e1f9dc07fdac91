package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
)

// A small run through the whole stack fills every field with a sane value; no
// speed target is asserted (the machine is shared). The remote phase's models
// answer in milliseconds, so that it costs the test little.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg := Config{Memories: 500, Users: 20, Requests: 100, IngestMessages: 500, Sessions: 10, DataDir: t.TempDir(), Progress: &progress,
		RemoteEmbedLatency: 2 * time.Millisecond, RemoteChatLatency: 5 * time.Millisecond, RemoteObservations: 200, Agents: 4, AgentTurn: 100 * time.Millisecond}
	res, err := Run(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if res.Memories != 500 || res.Users != 20 || res.Requests != 100 || res.IngestMessages != 500 || res.Sessions != 10 {
		t.Errorf("sizes = %d memories, %d users, %d requests, %d ingest messages, %d sessions; want the config's", res.Memories, res.Users, res.Requests, res.IngestMessages, res.Sessions)
	}
	positive := map[string]float64{
		"nats_rr_p50_us": res.NATSRRP50us, "nats_rr_p99_us": res.NATSRRP99us, "ctx_p50_us": res.CtxP50us, "ctx_p99_us": res.CtxP99us,
		"raw_js_msgs_per_s": res.RawJSMsgsPerS, "ingest_msgs_per_s": res.IngestMsgsPerS, "extract_sessions_per_s": res.ExtractSessPerS,
		"rss_mb": res.RSSMB, "bytes_per_memory": res.BytesPerMemory, "ctx_avg_tokens": res.CtxAvgTokens,
		"load_seconds": res.LoadSeconds, "load_memories_per_s": res.LoadPerS, "total_seconds": res.TotalSeconds,
		"ctx_backlog_p50_us": res.CtxBacklogP50us, "ctx_backlog_p99_us": res.CtxBacklogP99us, "ctx_backlog_vs_idle_p99": res.CtxBacklogVsIdleP99,
		"restart_ready_s": res.RestartReadyS, "restart_ctx_p50_us": res.RestartCtxP50us, "restart_ctx_p99_us": res.RestartCtxP99us,
		"llm_ingest_obs_per_s": res.LLMIngestObsPerS, "remote_ctx_p50_us": res.RemoteCtxP50us, "remote_ctx_p99_us": res.RemoteCtxP99us,
		"remote_nats_rr_p99_us": res.RemoteNATSRRP99us, "remote_extract_sessions_per_s": res.RemoteExtractSessPerS,
		"remote_model_calls_per_observation": res.RemoteModelCallsPerObservation, "remote_model_calls_per_session": res.RemoteModelCallsPerSession,
	}
	for name, v := range positive {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want a positive finite number", name, v)
		}
	}
	// The process's CPU time is known on every Unix; ingest does all raw JetStream
	// does for a message and much more (decoding, session state, the write).
	if _, ok := obs.ProcessCPU(); ok && !(res.RawCPUusPerMsg > 0 && res.IngestCPUusPerMsg > res.RawCPUusPerMsg) {
		t.Errorf("CPU per message: raw %v µs, ingest %v µs; want both positive, ingest above raw", res.RawCPUusPerMsg, res.IngestCPUusPerMsg)
	}
	if res.NATSRRP50us > res.NATSRRP99us || res.CtxP50us > res.CtxP99us {
		t.Errorf("p50 above p99: nats %v/%v, ctx %v/%v", res.NATSRRP50us, res.NATSRRP99us, res.CtxP50us, res.CtxP99us)
	}
	if got, want := res.CtxVsNATSP99, res.CtxP99us/res.NATSRRP99us; got != want {
		t.Errorf("ctx_vs_nats_p99 = %v, want ctx_p99_us/nats_rr_p99_us = %v", got, want)
	}
	if got, want := res.CtxBacklogVsIdleP99, res.CtxBacklogP99us/res.CtxP99us; got != want || res.BacklogRequests < 1 {
		t.Errorf("ctx_backlog_vs_idle_p99 = %v over %d requests, want ctx_backlog_p99_us/ctx_p99_us = %v", got, res.BacklogRequests, want)
	}
	if got, want := res.RestartCtxP99VsSteady, res.RestartCtxP99us/res.CtxP99us; got != want || res.RestartCtxP50us > res.RestartCtxP99us {
		t.Errorf("restart_ctx_p99_vs_steady = %v, want restart_ctx_p99_us/ctx_p99_us = %v; restart p50 %v, p99 %v", got, want, res.RestartCtxP50us, res.RestartCtxP99us)
	}
	// The fleet phase: 4 agents over the 20 users, 25 requests each, every
	// user handed over from the agent that held its first session, so the
	// packs of requests naming an agent_id carry that session.
	// Paced: the last of an agent's 25 turns is due 24 turns after the first.
	if res.FleetTurnMs != 100 || res.FleetSeconds < 24*0.100 {
		t.Errorf("fleet: a turn every %v ms, %v s in all; want 100 ms and at least 2.4 s", res.FleetTurnMs, res.FleetSeconds)
	}
	if res.FleetAgents != 4 || res.FleetUsers != 20 || res.FleetRequests != 100 {
		t.Errorf("fleet: %d agents, %d users, %d requests; want 4, 20, 100", res.FleetAgents, res.FleetUsers, res.FleetRequests)
	}
	if res.FleetHandovers != res.FleetRequests {
		t.Errorf("fleet: %d of %d packs carried a hand-over from another agent, want all", res.FleetHandovers, res.FleetRequests)
	}
	if !(res.FleetCtxP50us > 0 && res.FleetCtxP50us <= res.FleetCtxP99us) {
		t.Errorf("fleet: ctx p50 %v, p99 %v; want 0 < p50 <= p99", res.FleetCtxP50us, res.FleetCtxP99us)
	}
	if got, want := res.FleetCtxVsNATSP99, res.FleetCtxP99us/res.NATSRRP99us; got != want {
		t.Errorf("fleet_ctx_vs_nats_p99 = %v, want fleet_ctx_p99_us/nats_rr_p99_us = %v", got, want)
	}
	if got, want := res.IngestVsRaw, res.IngestMsgsPerS/res.RawJSMsgsPerS; got != want {
		t.Errorf("ingest_vs_raw = %v, want ingest_msgs_per_s/raw_js_msgs_per_s = %v", got, want)
	}
	// The remote phase: its asked user holds the first stack's share (500/20),
	// decisions go out in batches (well under one call per observation), and the
	// figures over the model's latency are what they say.
	if res.RemoteModelLatencyMs != 2 || res.RemoteChatLatencyMs != 5 || res.RemoteMemories != 25 || res.RemoteObservations != 200 {
		t.Errorf("remote phase: latencies %v/%v ms, %d memories, %d observations; want 2/5, 25, 200", res.RemoteModelLatencyMs, res.RemoteChatLatencyMs, res.RemoteMemories, res.RemoteObservations)
	}
	if res.RemoteModelCallsPerObservation >= 0.5 {
		t.Errorf("remote ingest made %v model calls per observation, want batched decisions", res.RemoteModelCallsPerObservation)
	}
	if got := res.RemoteCtxP99us - 2000; got != res.RemoteCtxP99OverModelUs || res.RemoteEmbedRequests == 0 {
		t.Errorf("remote_ctx_p99_minus_model_us = %v, want %v; %d embeddings requests", res.RemoteCtxP99OverModelUs, got, res.RemoteEmbedRequests)
	}
	if res.IngestStored != 500 {
		t.Errorf("ingest stored %d memories, want one per observation (500)", res.IngestStored)
	}
	// Each session states a file structure, a preference, an error with its fix and
	// a remember request; the offline extractor finds at least one entry per session.
	if res.ExtractEntries < 10 {
		t.Errorf("extraction wrote %d entries for 10 sessions", res.ExtractEntries)
	}
	// A memory is a 384-d float32 vector plus text and metadata: at least 1.5 KB.
	if res.BytesPerMemory < 1536 {
		t.Errorf("bytes_per_memory = %v, less than the vector alone", res.BytesPerMemory)
	}
	if res.GoVersion == "" || res.CPUs < 1 || res.GOMAXPROCS < 1 || res.RSSSource == "" {
		t.Errorf("environment fields missing: %+v", res)
	}
	for _, phase := range []string{"loading 500 memories", "context requests", "restarting agentmem", "raw JetStream", "ingest pipeline", "drains a backlog", "fleet: 4 agents", "extraction", "remote models", "the model's decider, remote embedder"} {
		if !strings.Contains(progress.String(), phase) {
			t.Errorf("progress output lacks %q:\n%s", phase, progress.String())
		}
	}

	// The --json contract: exactly these names, each a number.
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"memories", "nats_rr_p50_us", "nats_rr_p99_us", "ctx_p50_us", "ctx_p99_us", "ctx_vs_nats_p99", "raw_js_msgs_per_s", "ingest_msgs_per_s", "ingest_vs_raw", "rss_mb",
		"restart_ready_s", "restart_ctx_p99_us", "llm_ingest_obs_per_s", "remote_ctx_p50_us", "remote_ctx_p99_us", "remote_model_latency_ms",
		"fleet_agents", "fleet_turn_ms", "fleet_seconds", "fleet_ctx_p50_us", "fleet_ctx_p99_us", "fleet_ctx_vs_nats_p99"} {
		if _, ok := fields[name].(float64); !ok {
			t.Errorf("JSON field %q = %v, want a number", name, fields[name])
		}
	}

	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"context request p99", "µs", "msgs/s", "sessions/s", "target ctx_vs_nats_p99", "target ingest_vs_raw", "target ctx_backlog_vs_idle_p99",
		"ready after a restart", "target restart_ready_s", "target restart_ctx_p99_vs_steady", "remote: context p99", "obs/s", "target llm_ingest_obs_per_s", "target remote_ctx_p99_us",
		"fleet: context p99", "target fleet_ctx_vs_nats_p99"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if n := strings.Count(table.String(), "PASS") + strings.Count(table.String(), "FAIL"); n != len(res.Targets()) {
		t.Errorf("table has %d PASS/FAIL verdicts, want one per target (%d):\n%s", n, len(res.Targets()), table.String())
	}
}

func TestConfigDefaultUsers(t *testing.T) {
	for _, tc := range []struct{ memories, want int }{
		{0, DefaultUsers}, {DefaultMemories, DefaultUsers}, {1_000_000, DefaultUsers}, {2_000, 20}, {50, 1},
	} {
		c := Config{Memories: tc.memories}
		c.setDefaults()
		if c.Users != tc.want {
			t.Errorf("%d memories: %d users by default, want %d", tc.memories, c.Users, tc.want)
		}
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Memories: -1}, "Memories"},
		{Config{Requests: -5}, "Requests"},
		{Config{IngestMessages: -1}, "IngestMessages"},
		{Config{Sessions: -1}, "Sessions"},
		{Config{RemoteObservations: -1}, "RemoteObservations"},
		{Config{Agents: -1}, "Agents"},
		{Config{AgentTurn: -time.Second}, "AgentTurn"},
		{Config{RemoteChatLatency: -time.Second}, "RemoteChatLatency"},
		{Config{Memories: 10, Users: 11}, "Users"},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the defaults are invalid: %v", err)
	}
	if _, err := Run(context.Background(), Config{Users: -1}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Run with a bad config = %v, want ErrInvalidConfig", err)
	}
}

func TestTargetsVerdicts(t *testing.T) {
	pass := Result{CtxVsNATSP99: 5, IngestVsRaw: 0.3, CtxBacklogVsIdleP99: 5, RestartReadyS: 5, RestartCtxP99VsSteady: 2, FleetAgents: 1, FleetCtxVsNATSP99: 5}.Targets()
	fail := Result{CtxVsNATSP99: 5.01, IngestVsRaw: 0.29, CtxBacklogVsIdleP99: 5.01, RestartReadyS: 5.01, RestartCtxP99VsSteady: 2.01, FleetAgents: 1, FleetCtxVsNATSP99: 5.01}.Targets()
	if !slices.ContainsFunc(pass, func(t Target) bool { return t.Name == "fleet_ctx_vs_nats_p99" }) {
		t.Errorf("targets %+v lack fleet_ctx_vs_nats_p99 with a fleet phase", pass)
	}
	for i := range pass {
		if !pass[i].Pass || fail[i].Pass {
			t.Errorf("%s: at the bound pass=%t, beyond it pass=%t", pass[i].Name, pass[i].Pass, fail[i].Pass)
		}
	}
}

// Property: the nearest-rank percentile is a sample, with at least p of the
// samples at or below it and fewer than p strictly below it.
func TestPercentileIsNearestRank(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ds := rapid.SliceOfN(rapid.Int64Range(0, 1e9).AsAny(), 1, 500).Draw(t, "samples")
		p := rapid.Float64Range(0.01, 1).Draw(t, "p")
		samples := make([]time.Duration, len(ds))
		for i, d := range ds {
			samples[i] = time.Duration(d.(int64))
		}
		got := percentile(slices.Clone(samples), p)
		if !slices.Contains(samples, got) {
			t.Fatalf("percentile %v is not a sample", got)
		}
		atOrBelow, below := 0, 0
		for _, s := range samples {
			if s <= got {
				atOrBelow++
			}
			if s < got {
				below++
			}
		}
		n := float64(len(samples))
		if float64(atOrBelow) < p*n-1e-9 || float64(below) >= p*n {
			t.Fatalf("p=%v: %d of %d at or below %v, %d below", p, atOrBelow, len(samples), got, below)
		}
	})
}

// Property: every generated memory is a statement the offline write decider keeps,
// so the ingest phase stores one memory per observation and the load phase builds
// episodic records exactly as ingest does.
func TestGeneratedFactsAreKeptByTheDecider(t *testing.T) {
	decider := processor.NewRuleDecider()
	rapid.Check(t, func(t *rapid.T) {
		gen := newTexts(rapid.Uint64().Draw(t, "seed"))
		for range 20 {
			text := gen.fact()
			ep, err := decider.Decide(context.Background(), records.Observation{Role: string(events.RoleUser), Text: text, TS: time.Now(), ChatID: "c1", EventID: "e1"})
			if err != nil || !ep.Write {
				t.Fatalf("%q not kept: %s %v", text, ep.Reason, err)
			}
		}
	})
}

// Property: the asked user's session messages are never kept, so they leave the
// stored memory count exact.
func TestChatIsNotKeptByTheDecider(t *testing.T) {
	decider := processor.NewRuleDecider()
	rapid.Check(t, func(t *rapid.T) {
		gen := newTexts(rapid.Uint64().Draw(t, "seed"))
		role := rapid.SampledFrom([]events.Role{events.RoleUser, events.RoleAssistant}).Draw(t, "role")
		text := gen.chat(role)
		ep, err := decider.Decide(context.Background(), records.Observation{Role: string(role), Text: text, TS: time.Now(), ChatID: "c1", EventID: "e1"})
		if err != nil || ep.Write {
			t.Fatalf("%s %q kept (%s) %v", role, text, ep.Reason, err)
		}
	})
}

// The stack is built from the caller's configuration: a bad value in it fails the
// run before anything is measured, with an error that names it.
func TestRunTakesTheCallersConfiguration(t *testing.T) {
	_, err := Run(context.Background(), Config{Memories: 10, DataDir: t.TempDir(), Environ: []string{"AGENTMEM_INGEST_CONCURRENCY=-5"}}, nil)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "concurrency") {
		t.Fatalf("Run with ingest.concurrency -5: %v; want ErrInvalidConfig naming it", err)
	}
}

// A run's stack never consolidates on its timer, whatever the configuration
// says: a consolidation inside a slow run merged the ingest phase's repeated
// facts and failed its count (39567 episodic memories for 40000 observations).
func TestBenchStackHasNoConsolidationTimer(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Progress: io.Discard, Environ: []string{"AGENTMEM_VECTOR_CONSOLIDATE_INTERVAL=1s"}}
	b, err := newBencher(context.Background(), cfg, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if got := b.rt.Config.Vector.ConsolidateInterval; got != benchConsolidateInterval {
		t.Errorf("vector.consolidate_interval = %s, want %s", got, benchConsolidateInterval)
	}
}

// The curve phase times one namespace per size and reports each point.
func TestRunCurve(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg := Config{Memories: 200, Users: 10, Requests: 20, IngestMessages: 100, Sessions: 2, DataDir: t.TempDir(), Progress: &progress,
		Curve: true, CurveSizes: []int{300, 1_000}, SkipRemote: true}
	res, err := Run(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if len(res.Curve) != 2 || res.Curve[0].Memories != 300 || res.Curve[1].Memories != 1_000 {
		t.Fatalf("curve = %+v, want points for 300 and 1,000 memories", res.Curve)
	}
	for _, c := range res.Curve {
		if !(c.CtxP50us > 0 && c.CtxP50us <= c.CtxP99us) {
			t.Errorf("curve point %+v: want 0 < p50 <= p99", c)
		}
	}
	if res.CurveCtxP99us1k != res.Curve[1].CtxP99us {
		t.Errorf("curve_ctx_p99_us_1k = %v, want the 1,000 point's p99 %v", res.CurveCtxP99us1k, res.Curve[1].CtxP99us)
	}
}
