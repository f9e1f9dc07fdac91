package main

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/config"
)

// globalFlags are the flags every command understands.
type globalFlags struct {
	config  string
	natsURL string
	verbose bool

	mu      sync.Mutex
	refusal error // the first permission violation of the command's connections
}

// errRefused: the NATS server refused what the command asked, by the
// credential's permissions.
var errRefused = errors.New("refused by the NATS server")

// refuse records a permission violation the server reported.
func (g *globalFlags) refuse(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refusal == nil {
		g.refusal = fmt.Errorf("%w: %w (the credential may not do this; an admin credential may)", errRefused, err)
	}
}

// refused returns the refusal of the command's connections, or nil.
func (g *globalFlags) refused() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refusal
}

// reportRefusals makes c and its subcommands fail with the server's refusal,
// when there was one, instead of with what it left behind (a closed
// connection, a timeout).
func reportRefusals(c *cobra.Command, g *globalFlags) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if refusal := g.refused(); err != nil && refusal != nil {
				return refusal
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		reportRefusals(sub, g)
	}
}

func newRoot() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "agentmem",
		Short:         "Long-term memory for fleets of LLM agents, on NATS JetStream",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.config, "config", "", "configuration file (YAML); default $AGENTMEM_CONFIG; AGENTMEM_* variables override it")
	pf.StringVar(&g.natsURL, "nats-url", "", "NATS server, or cluster as URL[,URL...], to connect to (client commands; up then embeds none); default nats.url of the configuration")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "log at debug level to stderr")
	root.AddCommand(newUpCmd(g), newDemoCmd(g))
	for _, c := range clientCommands() {
		root.AddCommand(c.command(g))
	}
	root.AddCommand(newBackupsCmd(g), newPolicyCmd(g), newEventsCmd(g), newReplayCmd(g), newDiffCmd(g), newRebuildCmd(g))
	root.AddCommand(newExportCmd(g), newImportCmd(g), newForgetCmd(g), newBackupCmd(g), newRestoreCmd(g))
	root.AddCommand(newCredsCmd(g), newDLQCmd(g), newBenchCmd(g), newEvalCmd(g), newMCPCmd(g))
	reportRefusals(root, g)
	return root
}

// processLogger is the logger of a command that runs the stack in this process
// (demo, bench, eval): silent, so that its own output stays readable, or a
// development logger at debug level with --verbose.
func (g *globalFlags) processLogger() (*zap.Logger, error) {
	if !g.verbose {
		return zap.NewNop(), nil
	}
	return zap.NewDevelopment()
}

// configFile is the configuration file: --config, else $AGENTMEM_CONFIG ("" for
// none).
func (g *globalFlags) configFile() string {
	return config.File(g.config, os.Environ())
}
