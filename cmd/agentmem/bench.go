package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bench"
)

func newBenchCmd(g *globalFlags) *cobra.Command {
	var (
		cfg    bench.Config
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure agentmem in one process: NATS round trip vs context latency, JetStream vs ingest throughput, extraction, memory",
		Long: `bench starts the whole stack in this process (embedded NATS on loopback TCP, the four
workers, the embedded vector store) on a temporary directory, stores --memories memories over
--users users and measures: the bare NATS request/reply round trip and a context request
(p50/p99 and the ratio of the p99s), raw JetStream against the ingest pipeline (msgs/s and
the ratio), extraction (sessions/s), peak RSS and bytes per stored memory; then it stops the
stack and starts it again on the same data: the time until it answers a context request
(restart_ready_s) and the p99 of the --requests requests after it (restart_ctx_p99_us). Then, unless
--skip-remote, a second stack with an OpenAI-compatible chat model and embedder (a server
in this process answering after --remote-chat-latency and --remote-embed-latency): context
latency with the remote embedder, ingest with the model's write decider (observations/s
through one replica) and extraction with the model's extractor. The stack takes its tuning
from the configuration (--config, AGENTMEM_* variables); its storage, listeners, vector
store (and in the remote phase its models) are its own. Progress goes to stderr; the table
(or --json) to stdout. Unless --agents 0, a fleet phase: --agents agents at once, each on its
own connection, over the users (each handed over from one agent to the next), publishing
observations and timing context requests with their agent_id (fleet_ctx_p50_us,
fleet_ctx_p99_us). The targets are ctx_vs_nats_p99 <= 5, fleet_ctx_vs_nats_p99 <= 5, ingest_vs_raw >= 0.3,
restart_ready_s <= 5 and restart_ctx_p99_vs_steady <= 2; with
remote models llm_ingest_obs_per_s >= 300 and remote_ctx_p99_us <= the embedder's latency
plus 5x the phase's bare round-trip p99.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := g.processLogger()
			if err != nil {
				return err
			}
			cfg.Progress = cmd.ErrOrStderr()
			cfg.ConfigFile, cfg.Environ = g.configFile(), os.Environ()
			ctx, stop := app.SignalContext()
			defer stop()
			res, err := bench.Run(ctx, cfg, logger)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			return res.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Memories, "memories", bench.DefaultMemories, "memories stored before the latency phase")
	f.IntVar(&cfg.Users, "users", 0, fmt.Sprintf("users the memories are spread over, the asked user holding memories/users (default %d, or --memories/%d when fewer)", bench.DefaultUsers, bench.DefaultMemories/bench.DefaultUsers))
	f.IntVar(&cfg.Requests, "requests", bench.DefaultRequests, "timed context requests (and as many bare round trips), after a warm-up of a tenth")
	f.IntVar(&cfg.IngestMessages, "ingest-messages", bench.DefaultIngestMessages, "messages of the raw JetStream and of the ingest phase each")
	f.IntVar(&cfg.Sessions, "sessions", bench.DefaultSessions, "sessions of the extraction phase")
	f.StringVar(&cfg.DataDir, "data-dir", "", "keep the stack's data here (default: a temporary directory, removed afterwards)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.BoolVar(&cfg.Curve, "curve", false, fmt.Sprintf("also time context requests for one namespace of each of %v memories (the cost curve)", bench.CurveSizes))
	f.IntVar(&cfg.Agents, "agents", bench.DefaultAgents, fmt.Sprintf("agents of the fleet phase, publishing and asking for context at once over min(--users, %d) users (0 leaves the phase out)", bench.FleetMaxUsers))
	f.DurationVar(&cfg.AgentTurn, "agent-turn", bench.DefaultAgentTurn, "how often each agent of the fleet phase takes a turn (an observation and a context request)")
	f.BoolVar(&cfg.SkipRemote, "skip-remote", false, "leave out the remote-model phase")
	f.DurationVar(&cfg.RemoteEmbedLatency, "remote-embed-latency", bench.DefaultRemoteEmbedLatency, "how long the remote phase's embeddings requests take")
	f.DurationVar(&cfg.RemoteChatLatency, "remote-chat-latency", bench.DefaultRemoteChatLatency, "how long the remote phase's chat-completions requests take")
	f.IntVar(&cfg.RemoteObservations, "remote-observations", bench.DefaultRemoteObservations, "observations of the remote phase's ingest measurement")
	f.StringVar(&cfg.ProfileDir, "profile-dir", "", "write a CPU profile of each phase here (load, latency, raw, ingest, extraction, remote-* .pprof; go tool pprof)")
	return cmd
}
