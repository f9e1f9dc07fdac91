package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// errGuardRejected is the exit of a compression the loss guard refused.
var errGuardRejected = errors.New("compression rejected")

// group is a command whose subcommands are client commands.
func group(g *globalFlags, use, short string, subs ...clientCommand) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	for _, c := range subs {
		cmd.AddCommand(c.command(g))
	}
	return cmd
}

// newBackupsCmd is `agentmem backups list|restore` (SPEC A8).
func newBackupsCmd(g *globalFlags) *cobra.Command {
	var backup string
	return group(g, "backups", "List a user's backups or restore one",
		clientCommand{
			use: "list", short: "List the backups, oldest first",
			call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
				rep, err := cl.Backups(ctx, id.user)
				if err != nil {
					return err
				}
				for _, b := range rep.Backups {
					if _, err := fmt.Fprintln(out, b); err != nil {
						return err
					}
				}
				if len(rep.Backups) == 0 {
					_, err = fmt.Fprintf(out, "no backups for user %s (a compression or a restore makes one)\n", id.user)
				}
				return err
			},
		},
		clientCommand{
			use: "restore [BACKUP]", short: "Restore a backup (default: the newest of MEMORY.md); the current content is backed up first",
			args: func(args []string) error {
				if len(args) > 1 {
					return fmt.Errorf("restore takes at most one backup name, got %d", len(args))
				}
				backup = ""
				if len(args) == 1 {
					backup = args[0]
				}
				return nil
			},
			call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
				rep, err := cl.RestoreBackup(ctx, events.BackupRestoreRequest{UserID: id.user, Backup: backup})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "restored %s from %s\n", rep.File, rep.Restored)
				return err
			},
		})
}

// compressCmd is `agentmem compress --tenant T --user U [--dry-run]` (SPEC B4):
// exit 0 after a compression or a dry run, non-zero with the reason when the
// loss guard rejects the compressed text.
func compressCmd() clientCommand {
	var dryRun bool
	return clientCommand{
		use: "compress", short: "Compress MEMORY.md now (the loss guard still applies); --dry-run prints the diff",
		flags: func(f *pflag.FlagSet) {
			f.BoolVar(&dryRun, "dry-run", false, "print the diff, write nothing")
		},
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			rep, err := cl.Compress(ctx, events.CompressRequest{UserID: id.user, DryRun: dryRun})
			if err != nil {
				return err
			}
			if rep.Rejected != "" {
				return fmt.Errorf("%w: %s (MEMORY.md unchanged)", errGuardRejected, rep.Rejected)
			}
			if rep.Skipped != "" {
				_, err = fmt.Fprintf(out, "MEMORY.md not compressed: %s\n", rep.Skipped)
				return err
			}
			verb := "compressed"
			if dryRun {
				verb = "would compress"
				if _, err := fmt.Fprint(out, rep.Diff); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintf(out, "%s MEMORY.md: %d -> %d chars (%s)%s\n", verb, rep.BeforeChars, rep.AfterChars, rep.ProcessedBy, backupNote(rep.Backup))
			return err
		},
	}
}

func backupNote(b string) string {
	if b == "" {
		return ""
	}
	return ", backup " + b
}

// newPolicyCmd is `agentmem policy show|set|history|rollback` (SPEC B1, B5).
func newPolicyCmd(g *globalFlags) *cobra.Command {
	var (
		values   map[string]json.RawMessage
		snapshot string
	)
	printPolicy := func(out io.Writer) func(events.PolicyReply, error) error {
		return func(rep events.PolicyReply, err error) error {
			if err != nil {
				return err
			}
			return printJSON(out, rep)
		}
	}
	return group(g, "policy", "Show, change, list or roll back a user's memory policy",
		clientCommand{
			use: "show", short: "Print the effective policy and the overrides",
			call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
				return printPolicy(out)(cl.Policy(ctx, id.user))
			},
		},
		clientCommand{
			use: "set KEY=VALUE...", short: "Change policy keys (validated together; the current overrides are snapshotted first)",
			args: func(args []string) error {
				if len(args) == 0 {
					return errors.New("set needs at least one KEY=VALUE")
				}
				values = map[string]json.RawMessage{}
				for _, kv := range args {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return fmt.Errorf("%q: want KEY=VALUE", kv)
					}
					values[k] = policyValue(v)
				}
				return nil
			},
			call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
				return printPolicy(out)(cl.SetPolicy(ctx, events.PolicySetRequest{UserID: id.user, Values: values}))
			},
		},
		clientCommand{
			use: "history", short: "List the policy snapshots, oldest first",
			call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
				rep, err := cl.PolicyHistory(ctx, id.user)
				if err != nil {
					return err
				}
				for _, s := range rep.Snapshots {
					if _, err := fmt.Fprintf(out, "%s\t%s\n", s.Name, s.Overrides); err != nil {
						return err
					}
				}
				if len(rep.Snapshots) == 0 {
					_, err = fmt.Fprintf(out, "no policy snapshots for user %s (policy set and rollback make them)\n", id.user)
				}
				return err
			},
		},
		clientCommand{
			use: "rollback [SNAPSHOT]", short: "Make a snapshot (default: the newest) the overrides; the current ones are snapshotted first",
			args: func(args []string) error {
				if len(args) > 1 {
					return fmt.Errorf("rollback takes at most one snapshot name, got %d", len(args))
				}
				snapshot = ""
				if len(args) == 1 {
					snapshot = args[0]
				}
				return nil
			},
			call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
				return printPolicy(out)(cl.RollbackPolicy(ctx, events.PolicyRollbackRequest{UserID: id.user, Snapshot: snapshot}))
			},
		})
}

// policyValue reads VALUE of KEY=VALUE as JSON when it is a number or a
// boolean, else as a string (which the retriever then rejects naming the key).
func policyValue(v string) json.RawMessage {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return json.RawMessage(v)
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return json.RawMessage(strconv.FormatBool(b))
	}
	data, _ := json.Marshal(v)
	return data
}
