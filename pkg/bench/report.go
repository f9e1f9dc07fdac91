package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// The targets of docs/operations.md "Benchmarks", checked on every run (never in timed tests).
const (
	TargetCtxVsNATSP99 = 5.0 // the context p99 at most 5x the bare round trip's
	TargetIngestVsRaw  = 0.3 // ingest at least 30% of raw JetStream throughput
	// TargetCtxBacklogVsIdleP99: the context p99 while ingest drains a backlog at
	// most 5x the idle one.
	TargetCtxBacklogVsIdleP99 = 5.0
)

// Target is one target and whether the run met it.
type Target struct {
	Name  string
	Value float64
	Rule  string // "<= 5" or ">= 0.3"
	Pass  bool
}

// Targets checks r against the targets; the remote-model phase's when it ran.
func (r Result) Targets() []Target {
	ts := []Target{
		{Name: "ctx_vs_nats_p99", Value: r.CtxVsNATSP99, Rule: fmt.Sprintf("<= %g", TargetCtxVsNATSP99), Pass: r.CtxVsNATSP99 <= TargetCtxVsNATSP99},
		{Name: "ingest_vs_raw", Value: r.IngestVsRaw, Rule: fmt.Sprintf(">= %g", TargetIngestVsRaw), Pass: r.IngestVsRaw >= TargetIngestVsRaw},
		{Name: "ctx_backlog_vs_idle_p99", Value: r.CtxBacklogVsIdleP99, Rule: fmt.Sprintf("<= %g", TargetCtxBacklogVsIdleP99), Pass: r.CtxBacklogVsIdleP99 <= TargetCtxBacklogVsIdleP99},
		{Name: "restart_ready_s", Value: r.RestartReadyS, Rule: fmt.Sprintf("<= %g", TargetRestartReadyS), Pass: r.RestartReadyS <= TargetRestartReadyS},
		{Name: "restart_ctx_p99_vs_steady", Value: r.RestartCtxP99VsSteady, Rule: fmt.Sprintf("<= %g", TargetRestartCtxP99VsSteady), Pass: r.RestartCtxP99VsSteady <= TargetRestartCtxP99VsSteady},
	}
	if r.FleetAgents > 0 {
		ts = append(ts, Target{Name: "fleet_ctx_vs_nats_p99", Value: r.FleetCtxVsNATSP99, Rule: fmt.Sprintf("<= %g", TargetCtxVsNATSP99), Pass: r.FleetCtxVsNATSP99 <= TargetCtxVsNATSP99})
	}
	if r.RemoteModelLatencyMs == 0 {
		return ts
	}
	// The model's latency plus what the context target allows the local path.
	ctxBound := r.RemoteModelLatencyMs*1e3 + TargetCtxVsNATSP99*r.RemoteNATSRRP99us
	return append(ts,
		Target{Name: "llm_ingest_obs_per_s", Value: r.LLMIngestObsPerS, Rule: fmt.Sprintf(">= %g", TargetLLMIngestObsPerS), Pass: r.LLMIngestObsPerS >= TargetLLMIngestObsPerS},
		Target{Name: "remote_ctx_p99_us", Value: r.RemoteCtxP99us, Rule: fmt.Sprintf("<= %.0f", ctxBound), Pass: r.RemoteCtxP99us <= ctxBound},
	)
}

// WriteTable writes r for people: one aligned row per measurement with its unit,
// then the targets marked PASS or FAIL.
func (r Result) WriteTable(w io.Writer) error {
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	var b strings.Builder
	row := func(name, value, unit, note string) {
		b.WriteString(strings.TrimRight(fmt.Sprintf("  %-24s %10s %-10s  %s", name, value, unit, note), " ") + "\n")
	}
	fmt.Fprintf(&b, "agentmem bench: %s %s/%s, %d CPUs (GOMAXPROCS %d), %.0fs in all\n\n", r.GoVersion, r.OS, r.Arch, r.CPUs, r.GOMAXPROCS, r.TotalSeconds)
	row("memories stored", strconv.Itoa(r.Memories), "", fmt.Sprintf("over %d users, loaded in %.1fs (%.0f/s)", r.Users, r.LoadSeconds, r.LoadPerS))
	row("NATS request/reply p50", f(r.NATSRRP50us, 1), "µs", "bare micro echo over loopback TCP, same request bytes")
	row("NATS request/reply p99", f(r.NATSRRP99us, 1), "µs", "")
	row("context request p50", f(r.CtxP50us, 1), "µs", fmt.Sprintf("%d requests interleaved with the echo, ~%.0f tokens per pack", r.Requests, r.CtxAvgTokens))
	row("context request p99", f(r.CtxP99us, 1), "µs", fmt.Sprintf("until the reply's bytes arrive, as the echo; decoding a pack takes another %.0f µs (p50)", r.CtxDecodeP50us))
	row("context p99 / NATS p99", f(r.CtxVsNATSP99, 2), "x", "")
	for _, c := range r.Curve {
		row(fmt.Sprintf("ctx p99, %d in 1 ns", c.Memories), f(c.CtxP99us, 1), "µs", fmt.Sprintf("p50 %.1f µs; cost curve: one namespace of %d memories", c.CtxP50us, c.Memories))
	}
	row("raw JetStream", f(r.RawJSMsgsPerS, 0), "msgs/s", fmt.Sprintf("%d messages, async publish + 1 durable pull consumer acking%s", r.IngestMessages, cpuNote(r.RawCPUusPerMsg)))
	row("ingest pipeline", f(r.IngestMsgsPerS, 0), "msgs/s", fmt.Sprintf("%d observations -> %d episodic memories%s", r.IngestMessages, r.IngestStored, cpuNote(r.IngestCPUusPerMsg)))
	row("ingest / raw JetStream", f(r.IngestVsRaw, 2), "x", "")
	row("context p99 in backlog", f(r.CtxBacklogP99us, 1), "µs", fmt.Sprintf("p50 %.1f µs; %d requests while ingest drained %d observations", r.CtxBacklogP50us, r.BacklogRequests, r.IngestMessages))
	row("backlog p99 / idle p99", f(r.CtxBacklogVsIdleP99, 2), "x", "")
	if r.FleetAgents > 0 {
		row("fleet: context p50", f(r.FleetCtxP50us, 1), "µs", fmt.Sprintf("%d agents over %d users at once, a turn each every %g ms, %d requests with agent_id, %d with a hand-over", r.FleetAgents, r.FleetUsers, r.FleetTurnMs, r.FleetRequests, r.FleetHandovers))
		row("fleet: context p99", f(r.FleetCtxP99us, 1), "µs", "")
		row("fleet p99 / NATS p99", f(r.FleetCtxVsNATSP99, 2), "x", "")
	}
	row("ready after a restart", f(r.RestartReadyS, 2), "s", "from starting the stack again on the same data to the first context pack")
	row("restart: context p99", f(r.RestartCtxP99us, 1), "µs", fmt.Sprintf("p50 %.1f µs; the %d requests after it; %.2fx the steady p99", r.RestartCtxP50us, r.Requests, r.RestartCtxP99VsSteady))
	row("extraction", f(r.ExtractSessPerS, 1), "sessions/s", fmt.Sprintf("%d sessions -> %d Markdown entries", r.Sessions, r.ExtractEntries))
	if r.ModelCallsPerObservation > 0 || r.ModelCallsPerSession > 0 {
		row("model calls / observation", f(r.ModelCallsPerObservation, 2), "calls", "ingest phase: write decisions")
		row("model calls / session", f(r.ModelCallsPerSession, 1), "calls", fmt.Sprintf("extraction phase, its messages' ingest included; the extractor alone %.1f", r.ModelExtractorCallsPerSession))
	}
	if r.RemoteModelLatencyMs > 0 {
		row("remote: context p50", f(r.RemoteCtxP50us, 1), "µs", fmt.Sprintf("embeddings in %.0f ms, %d memories embedded remotely", r.RemoteModelLatencyMs, r.RemoteMemories))
		row("remote: context p99", f(r.RemoteCtxP99us, 1), "µs", fmt.Sprintf("p99 - model %.1f µs; bare NATS p99 of the phase %.1f µs", r.RemoteCtxP99OverModelUs, r.RemoteNATSRRP99us))
		row("remote: new query p50", f(r.RemoteCtxNewQueryP50us, 1), "µs", fmt.Sprintf("p99 %.1f µs; %d requests whose query embedding was not cached; p50 - model %.1f µs", r.RemoteCtxNewQueryP99us, r.RemoteCtxNewQueries, r.RemoteCtxNewQueryP50OverModelUs))
		row("remote: LLM ingest", f(r.LLMIngestObsPerS, 0), "obs/s", fmt.Sprintf("one ingest replica, chat model in %.0f ms, %d observations, %.2f model calls each", r.RemoteChatLatencyMs, r.RemoteObservations, r.RemoteModelCallsPerObservation))
		row("remote: LLM extraction", f(r.RemoteExtractSessPerS, 1), "sessions/s", fmt.Sprintf("%.1f model calls per session, its messages' ingest included", r.RemoteModelCallsPerSession))
	}
	row("peak RSS", f(r.RSSMB, 1), "MB", r.RSSSource+"; before the remote phase")
	row("bytes per memory", f(r.BytesPerMemory, 0), "B", fmt.Sprintf("vectors.db after a checkpoint (%.1f MB) / memories", float64(r.VectorBytes)/(1<<20)))
	b.WriteString("\n")
	for _, t := range r.Targets() {
		verdict := "FAIL"
		if t.Pass {
			verdict = "PASS"
		}
		fmt.Fprintf(&b, "  target %-23s %8.2f  (want %s)  %s\n", t.Name, t.Value, t.Rule, verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cpuNote is a throughput row's CPU time per message, when known.
func cpuNote(usPerMsg float64) string {
	if usPerMsg == 0 {
		return ""
	}
	return fmt.Sprintf("; %.0f µs CPU per message", usPerMsg)
}

// peakRSSMB is the process's peak resident set (VmHWM) on Linux; elsewhere the
// memory the Go runtime obtained from the OS, which bounds the Go heap's share.
func peakRSSMB() (float64, string) {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				fields := strings.Fields(rest) // "123456 kB"
				if len(fields) != 2 || fields[1] != "kB" {
					break
				}
				if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
					return kb / 1024, "peak RSS (VmHWM)"
				}
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.Sys) / (1 << 20), "Go runtime Sys (no /proc)"
}
