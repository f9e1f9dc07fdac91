package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/mcpserver"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

func newMCPCmd(g *globalFlags) *cobra.Command {
	var (
		tenant, user, agent, httpAddr, tokensFile string
		keepSecrets                               bool
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the memory tools to MCP clients (stdio, or streamable HTTP with --http)",
		Long: `mcp is a Model Context Protocol server for agentmem, talking to a running agentmem
over NATS like any other client.

  agentmem mcp --tenant acme --user u1        MCP over stdin/stdout for one user
                                              (logs go to stderr, nothing else to stdout)
  agentmem mcp --http 127.0.0.1:8808 --tokens-file tokens.txt
                                              streamable HTTP; each request's bearer
                                              token picks the tenant and user

tokens.txt has one line per client: <token> <tenant> <user>. The tools have no
tenant or user argument: a model can only reach the memory of the user it was given.
With a tenant agent's credential (nats.creds_file), memory_delete is not offered: the
server refuses an agent the delete endpoint.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if httpAddr == "" && (tenant == "" || user == "") {
				return errors.New("stdio needs --tenant and --user (or --http ADDR --tokens-file FILE)")
			}
			if httpAddr != "" && (tenant != "" || user != "") {
				return errors.New("--http takes the tenant and user from each request's bearer token (--tokens-file), not from --tenant/--user")
			}
			if httpAddr != "" && tokensFile == "" {
				return errors.New("--http needs --tokens-file: one `<token> <tenant> <user>` line per client")
			}
			cfg, logger, err := loadConfig(g, map[string]string{})
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			// An agent's credential cannot request the admin endpoints: their tools
			// are left out rather than offered and refused.
			agentCred := false
			if cfg.NATS.CredsFile != "" {
				id, err := natsauth.InspectFile(cfg.NATS.CredsFile)
				if err != nil {
					return err
				}
				agentCred = id.Role == natsauth.RoleAgent
				// A credential bound to an agent writes that agent's scope
				// only: the tools act as that agent.
				flagAgent := ""
				if cmd.Flags().Changed("agent") {
					flagAgent = agent
				}
				if id.AgentID != "" {
					if agent, err = actingAgent(flagAgent, id.AgentID); err != nil {
						return fmt.Errorf("%s: %w", cfg.NATS.CredsFile, err)
					}
				}
			}
			nc, err := app.Connect(cfg.NATS, "agentmem-mcp", nil, logger)
			if err != nil {
				return fmt.Errorf("%w (is `agentmem up` running? set --nats-url)", err)
			}
			defer nc.Close()
			newClient := func(t string) (*client.Client, error) {
				return client.New(nc, client.Config{Tenant: t, AgentID: agent, MaxTextBytes: cfg.Limits.MaxTextBytes, KeepSecrets: keepSecrets})
			}
			ctx, stop := app.SignalContext()
			defer stop()
			if httpAddr == "" {
				cl, err := newClient(tenant)
				if err != nil {
					return err
				}
				s, err := mcpserver.New(mcpserver.Config{User: user, Agent: agentCred}, cl, logger)
				if err != nil {
					return err
				}
				logger.Info("mcp server on stdio", zap.String("tenant", tenant), zap.String("user", user))
				return s.Run(ctx, &mcp.StdioTransport{})
			}
			return serveMCPHTTP(ctx, httpAddr, tokensFile, mcpserver.HTTPConfig{NewClient: newClient, Agent: agentCred}, logger)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant id (stdio)")
	f.StringVar(&user, "user", "", "user id whose memory the tools use (stdio)")
	f.StringVar(&agent, "agent", "mcp", "agent id put on the events the server publishes, and whose agent memory scope the tools read and write (scope agent); default the agent a credential is bound to (creds add --agent), else mcp")
	f.StringVar(&httpAddr, "http", "", "serve streamable HTTP on host:port instead of stdio")
	f.BoolVar(&keepSecrets, "keep-secrets", false, "publish events as given; by default credentials are redacted before they reach the event stream")
	f.StringVar(&tokensFile, "tokens-file", "", "with --http: file of \"<token> <tenant> <user>\" lines (tokens are never logged)")
	return cmd
}

func serveMCPHTTP(ctx context.Context, addr, tokensFile string, hc mcpserver.HTTPConfig, logger *zap.Logger) error {
	f, err := os.Open(tokensFile)
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	tokens, err := mcpserver.ParseTokens(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", tokensFile, err)
	}
	hc.Tokens = tokens
	h, err := mcpserver.Handler(hc, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("mcp server on streamable HTTP", zap.String("addr", ln.Addr().String()))
	fmt.Fprintf(os.Stderr, "agentmem mcp: streamable HTTP on http://%s/\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mcp: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
