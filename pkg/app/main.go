package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/obs"
)

// LoadConfig is how the worker binaries and the agentmem commands that run or reach
// a deployment (up, the client commands, dlq) start: the configuration of
// config.Load from the file path (--config; "" for $AGENTMEM_CONFIG), the process
// environment and overrides (dotted key → value, e.g. from flags; they win over the
// environment), validated there and only there, and the logger its log block
// selects. The in-process tools (demo, bench, eval) call config.Load themselves,
// with their sandbox as overrides, and log through their own quiet logger.
func LoadConfig(path string, overrides map[string]string) (config.Config, *zap.Logger, error) {
	environ := os.Environ()
	cfg, err := config.Load(config.File(path, environ), config.WithOverrides(environ, overrides))
	if err != nil {
		return config.Config{}, nil, err
	}
	logger, err := obs.NewLogger(obs.LogConfig{Level: cfg.Log.Level, Format: cfg.Log.Format})
	if err != nil {
		return config.Config{}, nil, err
	}
	return cfg, logger, nil
}

// SignalContext ends on SIGINT or SIGTERM, which start a graceful shutdown.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// RunWorker is the whole main of a worker binary: it parses --config, loads the
// configuration, connects and runs the named component until SIGINT/SIGTERM, and
// returns the exit code: 0 after a graceful stop or --help, 1 when the component
// fails, 2 for a bad flag or configuration.
func RunWorker(name string, args []string, stderr io.Writer) int {
	var cfgPath string
	code := 0
	cmd := &cobra.Command{
		Use:           name,
		Short:         "Run agentmem's " + name + " component on its own, until SIGINT or SIGTERM",
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(*cobra.Command, []string) error {
			code = runWorker(name, cfgPath, stderr)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "configuration file (YAML); default $"+config.EnvConfigFile+"; AGENTMEM_* variables override it")
	cmd.SetArgs(longFlags(args))
	cmd.SetOut(stderr)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil { // only flags and arguments fail here
		fmt.Fprintf(stderr, "%s: %v\n%s", name, err, cmd.UsageString())
		return 2
	}
	return code
}

// longFlags spells the long flags given with one dash (-config FILE, -help), as Go's
// flag package, which the worker binaries used before, accepted them, with two.
func longFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}

func runWorker(name, cfgPath string, stderr io.Writer) int {
	cfg, logger, err := LoadConfig(cfgPath, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	defer func() { _ = logger.Sync() }()
	ctx, stop := SignalContext()
	defer stop()
	return serveWorker(ctx, name, cfg, logger)
}

// serveWorker runs the named component on a runtime of its own until ctx ends. Its
// own lines name the worker; the runtime is given logger as it is, so that the
// component's lines, which Component names, carry the worker field once.
func serveWorker(ctx context.Context, name string, cfg config.Config, logger *zap.Logger) int {
	log := logger.With(obs.Worker(name))
	rt, err := NewRuntime(ctx, cfg, nil, logger)
	if err != nil {
		log.Error("start failed", zap.Error(err))
		return 1
	}
	defer func() { _ = rt.Close() }()
	if err := Serve(ctx, rt, []string{name}, func() { log.Info("ready") }); err != nil {
		log.Error("stopped with an error", zap.Error(err))
		return 1
	}
	log.Info("stopped")
	return 0
}
