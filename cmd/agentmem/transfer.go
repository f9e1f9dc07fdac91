package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/replay"
	"github.com/agentmem/agentmem/pkg/transfer"
)

// transferTimeout bounds each request of export, import and forget: an import
// page the retriever re-embeds, or the forget of a large user, takes longer
// than an ordinary request.
const transferTimeout = 5 * time.Minute

// withTransferClient is withClient for the long commands: no overall deadline
// (an export runs as long as it has pages), interrupted by SIGINT or SIGTERM.
func withTransferClient(g *globalFlags, tenant string, do func(ctx context.Context, cl *client.Client, maxPayload int) error) error {
	nc, _, err := dial(g, tenant, " (is `agentmem up` running? set --nats-url)")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := signalContext()
	defer cancel()
	return withTransferConn(ctx, nc, tenant, do)
}

// withTransferConn is withTransferClient on a connection the caller dialled.
func withTransferConn(ctx context.Context, nc *nats.Conn, tenant string, do func(ctx context.Context, cl *client.Client, maxPayload int) error) error {
	cl, err := client.New(nc, client.Config{Tenant: tenant, AgentID: "agentmem-cli", RequestTimeout: transferTimeout})
	if err != nil {
		return err
	}
	return do(ctx, cl, int(nc.MaxPayload()))
}

// newExportCmd is `agentmem export`.
func newExportCmd(g *globalFlags) *cobra.Command {
	var tenant, user, out string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a tenant's memory (or one user's) to a portable archive (tar.gz)",
		Long: `Write the memory of one user of a tenant, or of all its users, to one archive:
Markdown files (MEMORY.md, topic files, daily notes, backups, policy overrides and
snapshots), vector memories and memory items with their vectors, and session state.
It reads through the running retriever, page by page, whatever the stores are; the
event stream is not part of it. Import it with ` + "`agentmem import`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTransferClient(g, tenant, func(ctx context.Context, cl *client.Client, _ int) error {
				start := time.Now()
				// Written beside the target and renamed at the end, so that a failed
				// export leaves no partial archive under the name asked for.
				tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
				if err != nil {
					return err
				}
				defer func() { _ = os.Remove(tmp.Name()) }()
				m, err := transfer.Export(ctx, cl, user, tmp, cmd.ErrOrStderr())
				if err == nil {
					err = tmp.Sync()
				}
				if cerr := tmp.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					err = os.Rename(tmp.Name(), out)
				}
				if err != nil {
					return err
				}
				st, err := os.Stat(out)
				if err != nil {
					return err
				}
				t := m.Totals()
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: tenant %s, %d users, %d files, %d records (%d items), %d session values; %d bytes in %s\n",
					out, m.Tenant, len(m.Users), t.Files, t.Records, t.Items, t.Sessions, st.Size(), time.Since(start).Round(time.Millisecond))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant id (required)")
	f.StringVar(&user, "user", "", "only this user (default: every user of the tenant)")
	f.StringVar(&out, "out", "", "archive to write (required)")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// newImportCmd is `agentmem import`.
func newImportCmd(g *globalFlags) *cobra.Command {
	var in, tenant string
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Load an archive of `agentmem export` into the running deployment",
		Long: `Load an archive of ` + "`agentmem export`" + ` into the running deployment, into the
archive's tenant or the one --tenant names. The archive is checked whole before
anything is written. What the archive holds replaces what has the same file name,
record id or session key, so importing twice gives the same memory. When the
deployment's embedder differs from the archive's in model or dimensions, every
record is embedded again (and the command says so).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			open := func() (io.ReadCloser, error) { return os.Open(in) }
			m, err := transfer.Check(open)
			if err != nil {
				return fmt.Errorf("%s: %w", in, err)
			}
			if tenant == "" {
				tenant = m.Tenant
			}
			return withTransferClient(g, tenant, func(ctx context.Context, cl *client.Client, maxPayload int) error {
				rep, err := transfer.Import(ctx, cl, m, open, maxPayload*7/10, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				w := rep.Written
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "imported %s into tenant %s: %d users, %d file chunks, %d records, %d session values in %s\n",
					in, rep.Tenant, len(m.Users), w.Files, w.Records, w.Sessions, rep.Elapsed.Round(time.Millisecond))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "archive to read (required)")
	f.StringVar(&tenant, "tenant", "", "import into this tenant (default: the archive's)")
	_ = cmd.MarkFlagRequired("in")
	return cmd
}

// forgetReport is forget's --json output.
type forgetReport struct {
	Tenant  string             `json:"tenant"`
	User    string             `json:"user"`
	Removed events.ForgetReply `json:"removed"`
	// Replays are the local replays (<data_dir>/replays) that held the user's
	// memory: those of the user and those of the whole tenant, dropped whole.
	Replays []string `json:"replays"`
}

// newForgetCmd is `agentmem forget`.
func newForgetCmd(g *globalFlags) *cobra.Command {
	var (
		tenant, user string
		yes, asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "forget",
		Short: "Erase a user everywhere (an erasure request): memory, session state, backups, events",
		Long: `Erase one user of a tenant everywhere: Markdown files with backups and policy files,
vector memories and memory items, session state, summaries and turns, the workers'
state of the user, the user's events in the stream (by subject), memory history and
dead letters; then the replays under this machine's <data_dir>/replays that hold
the user (the user's and the whole tenant's) are dropped. It prints what it
removed. There is no undo: --yes is required.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return fmt.Errorf("forget erases every trace of user %s of tenant %s and cannot be undone; run it again with --yes", user, tenant)
			}
			if err := events.ValidateID("user", user); err != nil {
				return err
			}
			root, _, err := replayRoot(g)
			if err != nil {
				return err
			}
			return withTransferClient(g, tenant, func(ctx context.Context, cl *client.Client, _ int) error {
				removed, err := cl.Forget(ctx, user)
				if err != nil {
					return err
				}
				rep := forgetReport{Tenant: tenant, User: user, Removed: removed, Replays: []string{}}
				if rep.Replays, err = dropReplaysOf(root, tenant, user); err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), rep)
				}
				r := rep.Removed
				_, err = fmt.Fprintf(cmd.OutOrStdout(), `forgot user %s of tenant %s:
  files         %d (Markdown, backups, policy)
  memories      %d
  items         %d
  session keys  %d (states, summaries, reflection claims)
  turns         %d
  worker keys   %d
  events        %d
  history       %d
  dead letters  %d
  replays       %d dropped %v
`, user, tenant, r.Files, r.Memories, r.Items, r.SessionKeys, r.Turns, r.WorkerKeys, r.Events, r.History, r.DeadLetters, len(rep.Replays), rep.Replays)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant id (required)")
	f.StringVar(&user, "user", "", "the user to erase (required)")
	f.BoolVar(&yes, "yes", false, "confirm: erase the user, with no undo")
	f.BoolVar(&asJSON, "json", false, "print what was removed as JSON")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("user")
	return cmd
}

// dropReplaysOf drops the local replays of tenant whose selection holds user:
// the user's own and those of the whole tenant. A replay is a copy of live
// memory, so a forgotten user must not survive in one.
func dropReplaysOf(root, tenant, user string) ([]string, error) {
	list, err := replay.List(root, tenant)
	if err != nil {
		return nil, err
	}
	dropped := []string{}
	for _, m := range list {
		if m.User != "" && m.User != user {
			continue
		}
		if err := replay.Drop(root, tenant, m.Name); err != nil {
			return dropped, err
		}
		dropped = append(dropped, m.Name)
	}
	return dropped, nil
}
