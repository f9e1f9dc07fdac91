package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/diff"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/replay"
	"github.com/agentmem/agentmem/pkg/transfer"
)

// exitCode is an error that only sets the process's exit status (diff's 1 for
// "different"); main prints nothing for it.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// replayRoot is where the replays of the configured deployment live:
// <data_dir>/replays/<deployment>, the deployment named by its NATS URL
// (nats.url, --nats-url). A replay belongs to the stream it read, so r1 of one
// deployment is not r1 of another that the same client also speaks to.
func replayRoot(g *globalFlags) (string, config.Config, error) {
	cfg, _, err := loadConfig(g, map[string]string{})
	if err != nil {
		return "", cfg, err
	}
	return filepath.Join(cfg.DataDir, "replays", deploymentDir(cfg.NATS.URL)), cfg, nil
}

// deploymentDir names the deployment at the NATS URL list urls as one path
// element: its servers' host:port ("127.0.0.1_4222"; "localhost" is 127.0.0.1,
// the scheme, credentials and a missing default port do not count), with every
// character a file name should not carry replaced by "_".
func deploymentDir(urls string) string {
	var hosts []string
	for _, s := range strings.Split(urls, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		host := s
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			host = u.Hostname()
			if strings.EqualFold(host, "localhost") {
				host = "127.0.0.1"
			}
			host = net.JoinHostPort(strings.ToLower(host), or(u.Port(), "4222"))
		}
		hosts = append(hosts, host)
	}
	name := strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && (strings.ContainsRune(".-_+", r) || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return '_'
	}, strings.Join(hosts, "+"))
	if strings.Trim(name, ".") == "" {
		return "_" + name // never "", "." or "..": a path element of its own
	}
	return name
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// newReplayCmd is `agentmem replay` (SPEC E6) with list and drop.
func newReplayCmd(g *globalFlags) *cobra.Command {
	var (
		sel     selection
		name    string
		workers []string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Re-run workers over part of a tenant's stream into a shadow namespace (list, drop; compare with `agentmem diff`)",
		Long: `Re-run the workers (all, or those named) over a session, a user or a time range of a
tenant's event stream into the shadow namespace NAME: a private stack under
<data_dir>/replays/<deployment>/<tenant>/<NAME> (the deployment named by its NATS
URL, so each deployment has its own replays) with its own NATS server (no
listener), Markdown and vector store, configured by --config and AGENTMEM_* like any other command. The
live stream is only read; the live memory is never written. An interrupted replay
resumes when started again with the same selection.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := sel.query(time.Now())
			if err != nil {
				return err
			}
			root, cfg, err := replayRoot(g)
			if err != nil {
				return err
			}
			nc, _, err := dial(g, sel.tenant, " (replay reads the live stream: is agentmem running? set --nats-url)")
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			// The live stream is read as the live workers read it: their limits
			// and claims leave out what they dead-lettered.
			claims, err := eventstore.OpenClaims(ctx, js)
			if err != nil {
				return err
			}
			live, err := eventstore.New(eventstore.Config{Limits: cfg.Limits.Events(), Claims: claims,
				Claimant: bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{}).Durable}, js, nil)
			if err != nil {
				return err
			}
			logger, err := g.processLogger()
			if err != nil {
				return err
			}
			_, err = replay.Run(ctx, replay.Config{
				Root: root, Name: name, Tenant: sel.tenant, User: q.UserID, Session: q.SessionID, Since: q.Since, Until: q.Until,
				Workers: workers, ConfigFile: g.configFile(), Environ: os.Environ(), Progress: cmd.ErrOrStderr(), Timeout: timeout,
			}, live, logger)
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("replay %s interrupted; run the same command again to resume it", name)
			}
			return err
		},
	}
	f := cmd.Flags()
	sel.register(f)
	f.StringVar(&name, "name", "", "name of the replay (required): an id token")
	f.StringSliceVar(&workers, "workers", nil, "workers to re-run: "+strings.Join(replay.Workers, ",")+" (default all)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "longest wait for the workers after the last event")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("name")
	cmd.AddCommand(replayListCmd(g), replayDropCmd(g))
	return cmd
}

func replayListCmd(g *globalFlags) *cobra.Command {
	var (
		tenant string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a tenant's replays of the configured deployment (nats.url, --nats-url)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, _, err := replayRoot(g)
			if err != nil {
				return err
			}
			list, err := replay.List(root, tenant)
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []replay.Manifest{}
				}
				return printJSON(cmd.OutOrStdout(), list)
			}
			if len(list) == 0 {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "no replays of tenant %s on this deployment\n", tenant)
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSTATUS\tSELECTION\tWORKERS\tEVENTS\tMEMORIES\tFILES\tSTARTED")
			for _, m := range list {
				sel := "user " + or(m.User, "*") + " session " + or(m.Session, "*")
				if !m.Since.IsZero() || !m.Until.IsZero() {
					sel += fmt.Sprintf(" [%s, %s)", stamp(m.Since), stamp(m.Until))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", m.Name, m.Status, sel, strings.Join(m.Workers, ","), m.EventsRead, m.Memories, m.Files, m.Started.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the replays as JSON")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "…"
	}
	return t.Format(time.RFC3339)
}

func replayDropCmd(g *globalFlags) *cobra.Command {
	var tenant, name string
	cmd := &cobra.Command{
		Use:   "drop",
		Short: "Delete a replay: its Markdown, vector records, session state and stream events, in one step",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, _, err := replayRoot(g)
			if err != nil {
				return err
			}
			if err := replay.Drop(root, tenant, name); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "dropped replay %s of tenant %s\n", name, tenant)
			return err
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant id (required)")
	cmd.Flags().StringVar(&name, "name", "", "the replay (required)")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// newDiffCmd is `agentmem diff` (SPEC E6): exit 0 when there is no difference, 1
// when there is one, 2 on trouble, like diff(1).
func newDiffCmd(g *globalFlags) *cobra.Command {
	var (
		tenant, user, name, against string
		asJSON                      bool
	)
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Compare the live memory of a user with a replay's (or two replays): exit 0 same, 1 different",
		Long: `Compare the live memory of a user with a replay's, or with --against two replays.
Markdown files are shown as unified diffs; vector memories are matched by record id
(derived from the source event) and then by content and provenance, and listed as
added, removed or changed. The live side is read through the retriever (its export
endpoint) while the live stack runs, else from the stopped stack's stores.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := runDiff(g, tenant, user, name, against)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), errorLine(err))
				return exitCode(2)
			}
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), r); err != nil {
					return exitCode(2)
				}
			} else if err := r.Write(cmd.OutOrStdout()); err != nil {
				return exitCode(2)
			}
			if !r.Empty() {
				return exitCode(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant id (required)")
	f.StringVar(&user, "user", "", "user id (required)")
	f.StringVar(&name, "replay", "", "the replay to compare (required)")
	f.StringVar(&against, "against", "", "compare with this replay instead of the live memory")
	f.BoolVar(&asJSON, "json", false, "print the difference as JSON")
	for _, n := range []string{"tenant", "user", "replay"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}

func runDiff(g *globalFlags, tenant, user, name, against string) (diff.Result, error) {
	root, cfg, err := replayRoot(g)
	if err != nil {
		return diff.Result{}, err
	}
	ctx, cancel := signalContext()
	defer cancel()
	logger, err := g.processLogger()
	if err != nil {
		return diff.Result{}, err
	}
	side := func(name string) (diff.Snapshot, error) {
		sh, err := replay.Open(ctx, root, tenant, name, g.configFile(), os.Environ(), logger)
		if err != nil {
			return diff.Snapshot{}, err
		}
		defer func() { _ = sh.Close() }()
		return diff.Take(ctx, sh.Runtime.Docs, sh.Runtime.Vectors, tenant, user)
	}
	b, err := side(name)
	if err != nil {
		return diff.Result{}, err
	}
	if against != "" {
		a, err := side(against)
		if err != nil {
			return diff.Result{}, err
		}
		return diff.Compare(against, a, name, b), nil
	}
	a, err := liveSnapshot(ctx, g, cfg, tenant, user, logger)
	if err != nil {
		return diff.Result{}, err
	}
	return diff.Compare("live", a, name, b), nil
}

// liveSnapshot reads the live memory of a user: through the retriever's export
// while the live NATS server answers (whatever the stores, and the embedded vector
// store stays with the process that owns it), else from the stopped stack's stores.
func liveSnapshot(ctx context.Context, g *globalFlags, cfg config.Config, tenant, user string, logger *zap.Logger) (diff.Snapshot, error) {
	if nc, _, err := dial(g, tenant, ""); err == nil {
		defer nc.Close()
		var archive bytes.Buffer
		err := withTransferConn(ctx, nc, tenant, func(ctx context.Context, cl *client.Client, _ int) error {
			_, err := transfer.Export(ctx, cl, user, &archive, io.Discard)
			return err
		})
		if err != nil {
			return diff.Snapshot{}, fmt.Errorf("export the live memory: %w", err)
		}
		return diff.FromArchive(&archive, user)
	}
	rt, closeFn, err := replay.OpenStopped(ctx, cfg, logger)
	if err != nil {
		return diff.Snapshot{}, fmt.Errorf("open the live stores: %w", err)
	}
	defer func() { _ = closeFn() }()
	return diff.Take(ctx, rt.Docs, rt.Vectors, tenant, user)
}

// openLive opens the live stores the configuration names: through the live NATS
// server when it answers, else (a stopped agentmem up) on an embedded server
// without a listener over its store directory.
func openLive(ctx context.Context, cfg config.Config, logger *zap.Logger) (*app.Runtime, func(), error) {
	if nc, err := app.Connect(cfg.NATS, "agentmem-diff", nil, logger); err == nil {
		nc.Close()
		rt, err := app.NewRuntime(ctx, cfg, nil, logger)
		if err != nil {
			return nil, nil, err
		}
		return rt, func() { _ = rt.Close() }, nil
	}
	rt, closeFn, err := replay.OpenStopped(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	return rt, func() { _ = closeFn() }, nil
}
