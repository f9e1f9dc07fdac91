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
the ratio), extraction (sessions/s), peak RSS and bytes per stored memory. The stack takes
its tuning from the configuration (--config, AGENTMEM_* variables); its storage, listeners
and vector store are its own. Progress goes to stderr; the table (or --json) to stdout. The
targets are ctx_vs_nats_p99 <= 5 and ingest_vs_raw >= 0.3.`,
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
	f.StringVar(&cfg.ProfileDir, "profile-dir", "", "write a CPU profile of each phase here (load, latency, raw, ingest, extraction .pprof; go tool pprof)")
	return cmd
}
