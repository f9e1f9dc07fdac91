package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/demo"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

func newUpCmd(g *globalFlags) *cobra.Command {
	var (
		dataDir, listen, httpListen string
		auth, ui                    bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run everything in one process: embedded NATS (or --nats-url), the four workers, the retriever",
		Long: `up starts an embedded NATS server with JetStream and runs ingest, extractor,
consolidator and retriever in this process, with the filesystem Markdown store and the
embedded vector store under --data-dir. Agents connect to the printed NATS URL.

With --nats-url URL[,URL...] it embeds no server: every component connects to that
NATS server or cluster (with nats.creds_file, nats.tls.* and the other credentials of
the configuration, as the worker binaries do). nats.stream.replicas (3 on a 3-node
cluster) applies to every stream and key-value bucket it provisions.

With --auth the NATS server refuses connections without a credential it trusts:
issue one per tenant with "agentmem creds add --data-dir DIR --tenant T --out FILE"
(the signing keys live in DIR/auth) and give it to the tenant's agents as
AGENTMEM_NATS_CREDS_FILE.

The operations server (/metrics, /healthz, /readyz) and the inspector listen on
--http-listen, else http.listen of the configuration (AGENTMEM_HTTP_LISTEN),
loopback by default like NATS; "" turns the server off.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			overrides := map[string]string{"nats.embedded.listen": listen, "http.ui": strconv.FormatBool(ui)}
			if dataDir != "" {
				overrides["data_dir"] = dataDir
			}
			// Only when given: otherwise http.listen of the file or the environment applies.
			if cmd.Flags().Changed("http-listen") {
				overrides["http.listen"] = httpListen
			}
			cfg, logger, err := loadConfig(g, overrides)
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			ctx, stop := app.SignalContext()
			defer stop()
			context.AfterFunc(cmd.Context(), stop) // ExecuteContext's cancel stops it too
			opts := app.UpOptions{External: g.natsURL != ""}
			if opts.External && cmd.Flags().Changed("nats-listen") {
				return errors.New("--nats-listen configures the embedded NATS server, which --nats-url replaces")
			}
			if auth {
				if opts.Auth, err = natsauth.New(natsauth.Config{Dir: natsauth.KeyDir(cfg.DataDir)}, logger); err != nil {
					return err
				}
			}
			stack, err := app.Up(ctx, cfg, opts, logger)
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("%w (choose another address with --http-listen ADDR, http.listen or AGENTMEM_HTTP_LISTEN; \"\" turns the operations server off)", err)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "agentmem is up.\n")
			if url := stack.ClientURL(); url != "" {
				fmt.Fprintf(out, "  NATS:        %s   (export AGENTMEM_NATS_URL=%s)\n", url, url)
			}
			jetStream := cfg.NATS.Embedded.StoreDir
			if opts.External {
				jetStream = fmt.Sprintf("external, %d replicas per stream and bucket", cfg.NATS.Stream.Replicas)
			}
			fmt.Fprintf(out, "  Markdown:    %s\n  Vectors:     %s\n  JetStream:   %s\n", cfg.Memory.Dir, cfg.Vector.Path, jetStream)
			chat, embedder := stack.Runtime().Models()
			fmt.Fprintf(out, "  Model:       %s\n  Embedder:    %s\n", chat, embedder)
			if cfg.HTTP.Listen != "" {
				fmt.Fprintf(out, "  Operations:  http://%s/metrics /healthz /readyz\n", cfg.HTTP.Listen)
				if cfg.HTTP.UI {
					fmt.Fprintf(out, "  Inspector:   %s\n", inspectorURL(cfg.HTTP.Listen))
				}
			}
			if auth {
				fmt.Fprintf(out, "  Auth:        on; keys in %s\n", natsauth.KeyDir(cfg.DataDir))
				fmt.Fprintf(out, "First:  agentmem creds add --data-dir %s --tenant acme --out acme.creds && export AGENTMEM_NATS_CREDS_FILE=$PWD/acme.creds\n", cfg.DataDir)
			}
			fmt.Fprintf(out, "Try: agentmem observe --tenant acme --user u1 --session s1 --text 'Remember: my sales files have columns date, product, qty.'\n")
			fmt.Fprintf(out, "     agentmem end --tenant acme --user u1 --session s1\n")
			fmt.Fprintf(out, "     agentmem context --tenant acme --user u1 --query 'which columns do my sales files have?'\n")
			fmt.Fprintf(out, "Ctrl-C stops it (in-flight messages finish first).\n")
			select {
			case <-ctx.Done():
				fmt.Fprintf(out, "stopping… (in-flight messages finish first)\n")
			case err := <-stack.Done():
				logger.Error("stack stopped", zap.Error(err))
			}
			if err := stack.Close(); err != nil {
				return err
			}
			fmt.Fprintf(out, "stopped.\n")
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "where memory, vectors and JetStream data live (default data_dir of the configuration, ~/.agentmem)")
	cmd.Flags().BoolVar(&auth, "auth", false, "require NATS credentials: one per tenant from \"agentmem creds add\", limited to that tenant's subjects")
	cmd.Flags().BoolVar(&ui, "ui", true, "serve the web inspector at /ui/ on http.listen (sets http.ui)")
	cmd.Flags().StringVar(&httpListen, "http-listen", config.Default().HTTP.Listen, "`ADDR` (host:port) of the operations server and the inspector (sets http.listen, AGENTMEM_HTTP_LISTEN; \"\" turns it off)")
	cmd.Flags().StringVar(&listen, "nats-listen", "127.0.0.1:4222", "host:port of the embedded NATS server's client listener (\"\" for in-process only; not with --nats-url)")
	return cmd
}

// inspectorURL is the inspector's URL on the operations address listen.
func inspectorURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen + "/ui/"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/ui/"
}

func newDemoCmd(g *globalFlags) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the pipeline in-process on a sample conversation and print the memory it built",
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := g.processLogger()
			if err != nil {
				return err
			}
			ctx, stop := app.SignalContext()
			defer stop()
			_, err = demo.Run(ctx, dataDir, cmd.OutOrStdout(), logger)
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the demo's data here (default: a temporary directory, removed afterwards)")
	return cmd
}
