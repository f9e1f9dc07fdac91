package eval

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// LongTermUser is the tenant and user RunCompression builds its MEMORY.md for.
const LongTermUser = "longterm"

// CompressionRound is the user's MEMORY.md after a round of RunCompression,
// and what a dry-run compression does to it.
type CompressionRound struct {
	Round   int `json:"round"`
	Lines   int `json:"memory_lines"`
	Entries int `json:"memory_entries"`
	CompressionStats
}

// CompressionReport is the result of RunCompression.
type CompressionReport struct {
	Conversations int                `json:"conversations"`
	Scenarios     int                `json:"scenarios"`
	Rounds        []CompressionRound `json:"rounds"`
	Seconds       float64            `json:"seconds"`
}

// RunCompression builds one long MEMORY.md through the real pipeline and
// measures long-term compression (SPEC B4) on it: every LoCoMo conversation of
// convs, then the sessions of every scenario once per round, a week apart (a
// user who meets the same problems again), all for one user (LongTermUser);
// after each round the pipeline drains and the compress endpoint compresses
// the file in a dry run (the configured compressor: the offline rules unless a
// model is configured; the loss guard applies; nothing is written).
func RunCompression(ctx context.Context, cfg ScenarioConfig, convs []Conversation, scenarios []Scenario, rounds int, logger *zap.Logger) (*CompressionReport, error) {
	if rounds < 1 || len(convs)+len(scenarios) == 0 {
		return nil, fmt.Errorf("%w: %d rounds of %d conversations and %d scenarios", ErrInvalidData, rounds, len(convs), len(scenarios))
	}
	started := time.Now()
	run, err := startScenarioStack(ctx, &cfg, "agentmem-eval-compress", logger)
	if err != nil {
		return nil, err
	}
	defer run.close()
	cl, err := client.New(run.nc, client.Config{Tenant: LongTermUser, AgentID: agentID, RequestTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	rep := &CompressionReport{Conversations: len(convs), Scenarios: len(scenarios)}
	for i, c := range convs {
		if err := run.ev.replay(ctx, cl, LongTermUser, c.SampleID+"-", c, fmt.Sprintf("[%d/%d] %s", i+1, len(convs), c.SampleID)); err != nil {
			return nil, err
		}
	}
	for r := range rounds {
		start := scenarioStart.AddDate(0, 0, 7*r)
		for _, s := range scenarios {
			if err := replayScenario(ctx, cl, LongTermUser, fmt.Sprintf("r%d-%s-", r+1, s.ID), s, start); err != nil {
				return nil, err
			}
		}
		if err := run.ev.waitIdle(ctx, run.stack); err != nil {
			return nil, err
		}
		round := CompressionRound{Round: r + 1}
		if err := measureCompression(ctx, cl, LongTermUser, &round.CompressionStats); err != nil {
			return nil, err
		}
		doc, err := run.stack.Runtime().Docs.ReadFile(ctx, docstore.Namespace{Tenant: LongTermUser, User: LongTermUser}, docstore.MemoryFile)
		if err != nil {
			return nil, fmt.Errorf("eval: round %d: %w", r+1, err)
		}
		entries, _ := markdown.ParseEntries(string(doc))
		round.Lines, round.Entries = strings.Count(string(doc), "\n"), len(entries)
		rep.Rounds = append(rep.Rounds, round)
		fmt.Fprintf(cfg.Progress, "round %d: MEMORY.md %d chars, %d lines, %d entries; compressed %d chars (ratio %.3f), %d rejected\n",
			round.Round, round.BeforeChars, round.Lines, round.Entries, round.AfterChars, round.Ratio, round.Rejections)
	}
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// WriteTable prints the report as text, a line per round.
func (r *CompressionReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "round\tlines\tentries\tchars\tcompressed\tratio\trejected\t\n")
	for _, r := range r.Rounds {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.3f\t%d\t\n", r.Round, r.Lines, r.Entries, r.BeforeChars, r.AfterChars, r.Ratio, r.Rejections)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range r.Rounds {
		for _, why := range r.Reasons {
			fmt.Fprintf(w, "round %d rejected: %s\n", r.Round, why)
		}
	}
	_, err := fmt.Fprintf(w, "%d LoCoMo conversations, %d scenarios a round, one user; %.1fs\n", r.Conversations, r.Scenarios, r.Seconds)
	return err
}
