package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
)

// loadConfig is app.LoadConfig with the global flags applied as overrides (dotted
// keys): --nats-url, and --verbose for debug logs.
func loadConfig(g *globalFlags, overrides map[string]string) (config.Config, *zap.Logger, error) {
	if g.natsURL != "" {
		overrides["nats.url"] = g.natsURL
	}
	if g.verbose {
		overrides["log.level"] = "debug"
	}
	return app.LoadConfig(g.config, overrides)
}

// connection is what a client command needs: a connection and a client for a tenant.
type connection struct {
	nc     *nats.Conn
	client *client.Client
}

func connect(g *globalFlags, tenant string) (*connection, error) {
	cfg, logger, err := loadConfig(g, map[string]string{})
	if err != nil {
		return nil, err
	}
	nc, err := app.Connect(cfg.NATS, "agentmem-cli", logger)
	if err != nil {
		return nil, fmt.Errorf("%w (is `agentmem up` running? set --nats-url)", err)
	}
	cl, err := client.New(nc, client.Config{Tenant: tenant, AgentID: "agentmem-cli"})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &connection{nc: nc, client: cl}, nil
}

func (c *connection) Close() { c.nc.Close() }

// withClient runs do with a client for tenant and a bounded context, and closes the
// connection afterwards: the shape of every client command.
func withClient(g *globalFlags, tenant string, do func(ctx context.Context, cl *client.Client) error) error {
	c, err := connect(g, tenant)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := withTimeout()
	defer cancel()
	return do(ctx, c.client)
}

// ids are the namespace flags of client commands.
type ids struct{ tenant, user, session string }

func (i *ids) register(cmd *cobra.Command, withSession bool) {
	cmd.Flags().StringVar(&i.tenant, "tenant", "", "tenant id (required)")
	cmd.Flags().StringVar(&i.user, "user", "", "user id (required)")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("user")
	if withSession {
		cmd.Flags().StringVar(&i.session, "session", "", "session id (required)")
		_ = cmd.MarkFlagRequired("session")
	}
}

func withTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newObserveCmd(g *globalFlags) *cobra.Command {
	var (
		id   ids
		role string
		text string
		meta []string
	)
	cmd := &cobra.Command{
		Use:   "observe",
		Short: "Publish one message observation",
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := map[string]any{}
			for _, kv := range meta {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--meta %q: want key=value", kv)
				}
				m[k] = v
			}
			return withClient(g, id.tenant, func(ctx context.Context, cl *client.Client) error {
				eid, err := cl.Say(ctx, id.user, id.session, events.Role(role), text, m)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), eid)
				return nil
			})
		},
	}
	id.register(cmd, true)
	cmd.Flags().StringVar(&role, "role", "user", "user | assistant | tool | system")
	cmd.Flags().StringVar(&text, "text", "", "the message (required)")
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "key=value kept in the observation's meta (repeatable)")
	_ = cmd.MarkFlagRequired("text")
	return cmd
}

func newEndCmd(g *globalFlags) *cobra.Command {
	var id ids
	cmd := &cobra.Command{
		Use:   "end",
		Short: "Publish session_ended: the extractor turns the session into Markdown memory",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(g, id.tenant, func(ctx context.Context, cl *client.Client) error {
				eid, err := cl.EndSession(ctx, id.user, id.session)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), eid)
				return nil
			})
		},
	}
	id.register(cmd, true)
	return cmd
}

func newContextCmd(g *globalFlags) *cobra.Command {
	var (
		id          ids
		query       string
		asJSON      bool
		lightweight bool
	)
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Ask the retriever for a context pack",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(g, id.tenant, func(ctx context.Context, cl *client.Client) error {
				pack, err := cl.Context(ctx, events.ContextRequest{UserID: id.user, SessionID: id.session, Query: query, Lightweight: lightweight})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), pack)
				}
				fmt.Fprintln(cmd.OutOrStdout(), pack.Prompt)
				return nil
			})
		},
	}
	id.register(cmd, false)
	cmd.Flags().StringVar(&id.session, "session", "", "the asking session (its recent messages are included)")
	cmd.Flags().StringVar(&query, "query", "", "what the agent is about to do")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole pack as JSON instead of its prompt")
	cmd.Flags().BoolVar(&lightweight, "lightweight", false, "core memory and session only, no search")
	return cmd
}

func newSearchCmd(g *globalFlags) *cobra.Command {
	var (
		id    ids
		query string
		limit int
		types []string
	)
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Search memories (Markdown chunks, episodic and semantic)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(g, id.tenant, func(ctx context.Context, cl *client.Client) error {
				req := events.SearchRequest{UserID: id.user, Query: query, Limit: limit}
				for _, t := range types {
					req.MemoryTypes = append(req.MemoryTypes, events.MemoryType(t))
				}
				reply, err := cl.Search(ctx, req)
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), reply)
			})
		},
	}
	id.register(cmd, false)
	cmd.Flags().StringVar(&query, "query", "", "search text (required)")
	cmd.Flags().IntVar(&limit, "limit", 10, "at most this many results")
	cmd.Flags().StringSliceVar(&types, "types", nil, "memory types: markdown, episodic, semantic, item (default all)")
	_ = cmd.MarkFlagRequired("query")
	return cmd
}

func newAppendCmd(g *globalFlags) *cobra.Command {
	var (
		id      ids
		content string
		slot    string
	)
	cmd := &cobra.Command{
		Use:   "append",
		Short: "Append to MEMORY.md (long_term) or to today's daily note (today)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(g, id.tenant, func(ctx context.Context, cl *client.Client) error {
				rep, err := cl.Append(ctx, events.AppendRequest{UserID: id.user, Content: content, Slot: events.Slot(slot)})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "appended to %s\n", rep.File)
				return nil
			})
		},
	}
	id.register(cmd, false)
	cmd.Flags().StringVar(&content, "content", "", "what to remember (required)")
	cmd.Flags().StringVar(&slot, "slot", "long_term", "long_term | today")
	_ = cmd.MarkFlagRequired("content")
	return cmd
}

func newTopicCmd(g *globalFlags) *cobra.Command {
	var (
		id    ids
		topic string
	)
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Print a topic file (file_patterns or user_prefs)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(g, id.tenant, func(ctx context.Context, cl *client.Client) error {
				reply, err := cl.ReadTopic(ctx, events.TopicRequest{UserID: id.user, Topic: topic})
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), reply.Content)
				return nil
			})
		},
	}
	id.register(cmd, false)
	cmd.Flags().StringVar(&topic, "topic", "", "file_patterns | user_prefs (required)")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func newDLQCmd(g *globalFlags) *cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "Inspect and replay dead letters (SPEC E7)"}
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first",
		RunE: func(cmd *cobra.Command, _ []string) error {
			js, closeConn, err := jetStream(g)
			if err != nil {
				return err
			}
			defer closeConn()
			ctx, cancel := withTimeout()
			defer cancel()
			dls, err := bus.ListDeadLetters(ctx, js, bus.DefaultDLQStream, limit)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, dl := range dls {
				fmt.Fprintf(w, "%d\t%s\t%s\tworker=%s deliveries=%d\n\treason: %s\n", dl.Seq, dl.Time.Format(time.RFC3339), dl.Subject, dl.Worker, dl.Deliveries, dl.Reason)
			}
			fmt.Fprintf(w, "%d dead letter(s)\n", len(dls))
			return nil
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	replay := &cobra.Command{
		Use:   "replay SEQ...",
		Short: "Re-publish dead letters to their original subjects (after fixing the cause)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			js, closeConn, err := jetStream(g)
			if err != nil {
				return err
			}
			defer closeConn()
			ctx, cancel := withTimeout()
			defer cancel()
			dls, err := bus.ListDeadLetters(ctx, js, bus.DefaultDLQStream, events.MaxLimit)
			if err != nil {
				return err
			}
			bySeq := make(map[string]bus.DeadLetter, len(dls))
			for _, dl := range dls {
				bySeq[fmt.Sprint(dl.Seq)] = dl
			}
			for _, seq := range args {
				dl, ok := bySeq[seq]
				if !ok {
					return fmt.Errorf("no dead letter with sequence %s (see `agentmem dlq list`)", seq)
				}
				if err := bus.ReplayDeadLetter(ctx, js, dl); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "replayed %s to %s\n", seq, dl.Subject)
			}
			return nil
		},
	}
	dlq.AddCommand(list, replay)
	return dlq
}

func jetStream(g *globalFlags) (jetstream.JetStream, func(), error) {
	cfg, logger, err := loadConfig(g, map[string]string{})
	if err != nil {
		return nil, nil, err
	}
	nc, err := app.Connect(cfg.NATS, "agentmem-cli", logger)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}
