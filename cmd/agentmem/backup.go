package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/backup"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// newBackupCmd is `agentmem backup`.
func newBackupCmd(g *globalFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Copy a whole running deployment (streams, KV buckets, vector store, Markdown) into a directory",
		Long: `Copy the deployment at --nats-url into DIR (new or empty): every JetStream stream
and KV bucket as a snapshot with its consumers' positions, the embedded vector store
and the Markdown tree, and manifest.json (versions, the cut's stream sequence and
consumer positions, each file's size and SHA-256). The retriever holds its writes and
the workers pause while the copy is taken; events keep being accepted. Needs the
service credential (not a tenant's). Restore with ` + "`agentmem restore`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, _, err := dial(g, "", " (is the deployment running? set --nats-url; with `up --auth`, AGENTMEM_NATS_CREDS_FILE=DIR/auth/service.creds)")
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := signalContext()
			defer cancel()
			m, err := backup.Backup(ctx, nc, out, backup.Options{Agentmem: buildVersion(), Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "backup in %s: %d streams, cut at %s sequence %d\n", out, len(m.Streams), m.Cut.Stream, m.Cut.Sequence)
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write the backup to (new or empty)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// newRestoreCmd is `agentmem restore`.
func newRestoreCmd(g *globalFlags) *cobra.Command {
	var in, dataDir, keys string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Restore a backup of `agentmem backup` into an empty data directory",
		Long: `Check the backup in --in against its manifest (every file's size and SHA-256),
then write it into the data directory --data-dir, whose NATS store, vector store and
Markdown directory must not exist yet (or be empty): the streams with their
consumers' positions, the vector store and the Markdown tree. ` + "`agentmem up --data-dir DIR`" + `
then serves the memory of the backup's cut and processes the events after it.

A backup of a deployment run with ` + "`up --auth`" + ` holds its streams in that deployment's
NATS account: restore it with --keys, the deployment's key directory (DATA_DIR/auth),
which is copied to the new data directory's auth/ (it must not exist yet or be empty);
` + "`up --auth --data-dir DIR`" + ` then accepts the credentials the deployment issued. Without
--keys such a backup is refused, as are keys of another deployment.

A backup of a Qdrant collection (vector.backend qdrant with vector.qdrant.http_url) is
uploaded into the Qdrant of the configuration, as vector.collection, which must not
exist yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig(g, map[string]string{"data_dir": dataDir})
			if err != nil {
				return err
			}
			q, err := app.QdrantBackup(cfg)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			m, err := backup.Restore(ctx, in, backup.Target{NATSStoreDir: cfg.NATS.Embedded.StoreDir, VectorPath: cfg.Vector.Path, MarkdownDir: cfg.Memory.Dir,
				Keys: keys, KeyDir: natsauth.KeyDir(cfg.DataDir), Qdrant: q})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %d streams and %d files of the backup of %s (cut at %s sequence %d) into %s\n",
				len(m.Streams), len(m.Files), m.Created.Format("2006-01-02 15:04:05Z"), m.Cut.Stream, m.Cut.Sequence, cfg.DataDir)
			return err
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "the backup directory")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the data directory to restore into")
	cmd.Flags().StringVar(&keys, "keys", "", "the key directory (DATA_DIR/auth) of the deployment, for a backup of one run with up --auth")
	_ = cmd.MarkFlagRequired("in")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

// buildVersion is the module version and VCS revision of this binary.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
	}
	return v
}
