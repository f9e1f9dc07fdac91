package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/eval"
)

func newEvalCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate agentmem's retrieval on benchmark data",
	}
	cmd.AddCommand(newEvalLoCoMoCmd(g), newEvalScenariosCmd(g), newEvalCompressCmd(g), newEvalFleetCmd(g))
	return cmd
}

func newEvalLoCoMoCmd(g *globalFlags) *cobra.Command {
	var (
		data, ks, dataDir, questions, samples string
		asJSON                                bool
	)
	cmd := &cobra.Command{
		Use:   "locomo --data FILE",
		Short: "Evidence recall@k on a LoCoMo-format file, beside in-run baselines and the paper's anchor",
		Long: `locomo replays every conversation of a LoCoMo-format file through an in-process
agentmem (each conversation its own tenant and user; turns as observations with their
dia_id in meta, the session's date as event time; session_ended per session), waits
for the pipeline, consolidates, and then asks every question as a context request.

recall@k is the fraction of a question's evidence turns found in the provenance of
the pack's first k items: the vector memories (episodic and semantic) by score, then
the keyword chunks of MEMORY.md. Baselines on the same data: BM25 over the raw turns,
and keyword chunks of one MEMORY.md holding every turn. The paper's DRAGON retriever
is printed beside them. Adversarial questions (category 5) are reported apart and
left out of the overall recall. The configuration (--config, AGENTMEM_*) selects the
models; storage is always a private directory.

The data is the official LoCoMo file, data/locomo10.json of
https://github.com/snap-research/locomo (10 conversations, CC BY-NC 4.0);
--samples conv-26,conv-30,conv-41,conv-42,conv-43 takes the five that
BENCHMARKS.md's figures are measured on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kList, err := parseKs(ks)
			if err != nil {
				return err
			}
			convs, err := loadLoCoMo(data, samples)
			if err != nil {
				return err
			}
			logger, err := g.processLogger()
			if err != nil {
				return err
			}
			cfg := eval.Config{Ks: kList, ConfigFile: g.configFile(), Environ: os.Environ(), DataDir: dataDir, Progress: cmd.ErrOrStderr()}
			out, err := createOutput(questions)
			if err != nil {
				return err
			}
			defer out.Close()
			cfg.Questions = out.Writer()
			ev, err := eval.New(cfg, logger)
			if err != nil {
				return err
			}
			ctx, stop := app.SignalContext()
			defer stop()
			rep, err := ev.Run(ctx, convs)
			if err != nil {
				return err
			}
			return printReport(cmd, asJSON, rep)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "LoCoMo-format JSON file, such as the official locomo10.json (required)")
	cmd.Flags().StringVar(&samples, "samples", "", samplesUsage)
	cmd.Flags().StringVar(&ks, "k", "5,10,25,50", "cut-offs of recall@k, comma-separated")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the run's memory here (default: a temporary directory, removed afterwards)")
	cmd.Flags().StringVar(&questions, "questions", "", "write every question as a JSON line here: evidence turns, the default pack's first 10 items, recall@10")
	_ = cmd.MarkFlagRequired("data")
	return cmd
}

// parseKs reads "5,10,25,50"; eval.Config.Validate checks the values.
func parseKs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--k: %q is not a number", f)
		}
		out = append(out, k)
	}
	return out, nil
}

func newEvalScenariosCmd(g *globalFlags) *cobra.Command {
	var (
		data, dataDir, prompts string
		asJSON                 bool
	)
	cmd := &cobra.Command{
		Use:   "scenarios --data DIR",
		Short: "Pass rates of the scenario suite: what gets remembered, and what must not be",
		Long: `scenarios replays every scenario of DIR (*.json, format in testdata/scenarios/README.md)
through an in-process agentmem (each scenario its own tenant and user; its sessions
as observations with their roles, session_ended after each), waits for the pipeline,
consolidates, and asks each query as a context request with the retriever's default
budget. A scenario passes when every query's prompt contains its "must" strings and
none of its "must_not" strings (NFKC, case folded). Reports the pass rate overall,
per category and per language; the configuration (--config, AGENTMEM_*) selects the
models; storage is always a private directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scenarios, err := eval.LoadScenarios(data)
			if err != nil {
				return err
			}
			return runStackEval(cmd, g, asJSON, dataDir, prompts, func(ctx context.Context, cfg eval.ScenarioConfig, logger *zap.Logger) (report, error) {
				return eval.RunScenarios(ctx, cfg, scenarios, logger)
			})
		},
	}
	cmd.Flags().StringVar(&data, "data", "testdata/scenarios", "directory of scenario files")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the run's memory here (default: a temporary directory, removed afterwards)")
	cmd.Flags().StringVar(&prompts, "prompts", "", "write every query's prompt to this file")
	return cmd
}

func newEvalFleetCmd(g *globalFlags) *cobra.Command {
	var (
		dataDir, prompts string
		asJSON           bool
		cfg              eval.FleetConfig
	)
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Hand-over recall and leaks of a synthetic fleet of agents serving many users",
		Long: `fleet generates a fleet from --seed (agents and users dealt to the tenants in turn;
each user has --sessions sessions, each held by another agent of its tenant than the
one before, the first with the user's personal details: a name, a phone number, a
customer reference; each with a task on an order and a session goal as its open item;
an agent's first session has a tool error and the fix that worked; each tenant has
facts) and runs it through an in-process agentmem with memory.agent_learning on: the
facts are appended to the tenant scope, every session is published as the agent that
held it and ended, the pipeline drains, and then for each user another agent of the
tenant than the last asks for the user's context in a new session (a preview, at the
retriever's default budget).

handover_recall is the fraction of the last sessions' tasks and open items found in
the packs' hand-over; agent_knowledge_recall of the asking agents' fixes learned with
another user found in the agent scope of the pack; tenant_knowledge_recall of the
tenant's facts found in the tenant scope of the pack; leaks counts the customer
references of one user found in another user's pack or in any agent or tenant scope
(must be 0). The configuration (--config, AGENTMEM_*) selects the models; storage is
always a private directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStackEval(cmd, g, asJSON, dataDir, prompts, func(ctx context.Context, sc eval.ScenarioConfig, logger *zap.Logger) (report, error) {
				cfg.ScenarioConfig = sc
				return eval.RunFleet(ctx, cfg, logger)
			})
		},
	}
	cmd.Flags().IntVar(&cfg.Agents, "agents", eval.DefaultFleetAgents, "agents of the fleet, dealt to the tenants in turn (at least 2 a tenant)")
	cmd.Flags().IntVar(&cfg.Users, "users", eval.DefaultFleetUsers, "users of the fleet, dealt to the tenants in turn")
	cmd.Flags().IntVar(&cfg.Tenants, "tenants", eval.DefaultFleetTenants, "tenants of the fleet")
	cmd.Flags().IntVar(&cfg.Sessions, "sessions", eval.DefaultFleetSessions, "sessions of each user (at least 2)")
	cmd.Flags().Uint64Var(&cfg.Seed, "seed", eval.DefaultFleetSeed, "seed the fleet is generated from")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the run's memory here (default: a temporary directory, removed afterwards)")
	cmd.Flags().StringVar(&prompts, "prompts", "", "write every pack's prompt to this file")
	return cmd
}

func newEvalCompressCmd(g *globalFlags) *cobra.Command {
	var (
		locomo, scenarios, dataDir, samples string
		rounds                              int
		asJSON                              bool
	)
	cmd := &cobra.Command{
		Use:   "compress [--locomo FILE] [--data DIR] [--rounds N]",
		Short: "Long-term compression on a long MEMORY.md the pipeline builds: ratio and loss-guard rejections",
		Long: `compress builds one long MEMORY.md through an in-process agentmem and measures
long-term compression on it (SPEC B4): every conversation of the LoCoMo-format file
(--locomo, optional), then every scenario of DIR (format in testdata/scenarios/README.md)
once per round, a week apart, all for one user ("longterm"), as a user who meets the
same problems again would. After each round the pipeline drains and the compress
endpoint compresses MEMORY.md in a dry run: the configured compressor (the offline
rules unless a model is configured) and the loss guard, writing nothing. Prints per
round the file's lines, entries and characters, the compressed characters, the ratio
(after / before) and whether the guard rejected it. Storage is always a private
directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var convs []eval.Conversation
			if locomo != "" {
				var err error
				if convs, err = loadLoCoMo(locomo, samples); err != nil {
					return err
				}
			}
			list, err := eval.LoadScenarios(scenarios)
			if err != nil {
				return err
			}
			logger, err := g.processLogger()
			if err != nil {
				return err
			}
			ctx, stop := app.SignalContext()
			defer stop()
			cfg := eval.ScenarioConfig{ConfigFile: g.configFile(), Environ: os.Environ(), DataDir: dataDir, Progress: cmd.ErrOrStderr()}
			rep, err := eval.RunCompression(ctx, cfg, convs, list, rounds, logger)
			if err != nil {
				return err
			}
			return printReport(cmd, asJSON, rep)
		},
	}
	cmd.Flags().StringVar(&locomo, "locomo", "", "LoCoMo-format JSON file whose conversations are replayed first")
	cmd.Flags().StringVar(&samples, "samples", "", samplesUsage)
	cmd.Flags().StringVar(&scenarios, "data", "testdata/scenarios", "directory of scenario files, replayed every round")
	cmd.Flags().IntVar(&rounds, "rounds", 4, "how many times the scenarios are replayed, a week apart")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the run's memory here (default: a temporary directory, removed afterwards)")
	return cmd
}

const samplesUsage = "only these conversations of the file, by sample_id, comma-separated (default all)"

// loadLoCoMo reads a LoCoMo-format file, keeping the conversations samples names
// (sample_id, comma-separated; "" keeps all) in file order.
func loadLoCoMo(path, samples string) ([]eval.Conversation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	convs, err := eval.ParseLoCoMo(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if samples == "" {
		return convs, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(samples, ",") {
		want[strings.TrimSpace(id)] = true
	}
	var kept []eval.Conversation
	var have []string
	for _, c := range convs {
		have = append(have, c.SampleID)
		if want[c.SampleID] {
			kept = append(kept, c)
			delete(want, c.SampleID)
		}
	}
	if len(want) > 0 {
		missing := slices.Sorted(maps.Keys(want))
		return nil, fmt.Errorf("--samples: %s has no sample %s (it has %s)", path, strings.Join(missing, ", "), strings.Join(have, ", "))
	}
	return kept, nil
}

// printReport prints an eval report as JSON or as its table.
// report is what an evaluation prints: a table, or itself as JSON.
type report interface{ WriteTable(io.Writer) error }

// runStackEval runs an evaluation on a private stack (eval.ScenarioConfig: the
// configuration's models, the data under dataDir, every prompt to the file
// prompts) until the report or a signal, and prints the report.
func runStackEval(cmd *cobra.Command, g *globalFlags, asJSON bool, dataDir, prompts string, run func(context.Context, eval.ScenarioConfig, *zap.Logger) (report, error)) error {
	logger, err := g.processLogger()
	if err != nil {
		return err
	}
	cfg := eval.ScenarioConfig{ConfigFile: g.configFile(), Environ: os.Environ(), DataDir: dataDir, Progress: cmd.ErrOrStderr()}
	out, err := createOutput(prompts)
	if err != nil {
		return err
	}
	defer out.Close()
	cfg.Prompts = out.Writer()
	ctx, stop := app.SignalContext()
	defer stop()
	rep, err := run(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return printReport(cmd, asJSON, rep)
}

func printReport(cmd *cobra.Command, asJSON bool, rep report) error {
	if asJSON {
		return printJSON(cmd.OutOrStdout(), rep)
	}
	return rep.WriteTable(cmd.OutOrStdout())
}

// output is the file of an optional output flag (--questions, --prompts): none
// when the flag is empty.
type output struct{ f *os.File }

func createOutput(path string) (output, error) {
	if path == "" {
		return output{}, nil
	}
	f, err := os.Create(path)
	return output{f}, err
}

// Writer is the file, or nil (not a nil *os.File in an interface) without one.
func (o output) Writer() io.Writer {
	if o.f == nil {
		return nil
	}
	return o.f
}

func (o output) Close() {
	if o.f != nil {
		_ = o.f.Close()
	}
}
