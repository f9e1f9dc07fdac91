package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentmem/agentmem/pkg/replay"
)

// newRebuildCmd is `agentmem rebuild`: the derived memory of a namespace made
// again from the stream (issue 17, item 6).
func newRebuildCmd(g *globalFlags) *cobra.Command {
	var (
		tenant, user string
		yes          bool
		timeout      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Drop a user's (or a tenant's) derived memory and make it again from the event stream",
		Long: `Replay the tenant's stream (or one user's part of it) with this configuration into a
replay of its own under <data_dir>/replays/<deployment> — every worker, and every write request
(append, add, items, policy, ...) applied again in stream order — then replace the
namespace's Markdown, vector memories and items, and session state in the stores the
configuration names by what the replay made, and drop the replay. Use it after a lost
disk, or to move to Qdrant and the JetStream DocStore: configure the new stores and
rebuild. Nothing is published to the stream. Stop the stack (or the namespace's
traffic) first: a write arriving while the namespace is replaced would be lost, and
the embedded vector store is owned by one process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return errors.New("rebuild deletes the derived memory of the namespace before making it again from the stream: add --yes to go ahead")
			}
			root, cfg, err := replayRoot(g)
			if err != nil {
				return err
			}
			logger, err := g.processLogger()
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			rt, closeLive, err := openLive(ctx, cfg, logger)
			if err != nil {
				return fmt.Errorf("open the stores: %w (with the embedded vector store, stop the live stack first)", err)
			}
			defer closeLive()
			_, err = replay.Rebuild(ctx, replay.RebuildConfig{
				Root: root, Tenant: tenant, User: user, ConfigFile: g.configFile(), Environ: os.Environ(),
				Progress: cmd.ErrOrStderr(), Timeout: timeout,
			}, rt.Events, rt, logger)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant id (required)")
	f.StringVar(&user, "user", "", "rebuild only this user (default: every user of the tenant's stream)")
	f.BoolVar(&yes, "yes", false, "confirm: the namespace's derived memory is deleted and made again")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "longest wait for the workers after the last event")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}
