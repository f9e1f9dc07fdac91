package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/natsauth"
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

// dial connects to the configured NATS server as the command-line client; hint is
// appended to a connection error. With a tenant's credential (nats.creds_file) and
// a tenant to speak for, the two must agree: the server would refuse everything
// else. A person running a client command wants its
// output, not the connection's info lines: it logs warnings and errors only (or
// less, as the configuration says), everything with --verbose. It returns the
// configuration it connected with.
func dial(g *globalFlags, tenant, hint string) (*nats.Conn, config.Config, error) {
	if err := checkID("tenant", tenant); err != nil {
		return nil, config.Config{}, err
	}
	cfg, logger, err := loadConfig(g, map[string]string{})
	if err != nil {
		return nil, config.Config{}, err
	}
	if tenant != "" && cfg.NATS.CredsFile != "" {
		id, err := natsauth.InspectFile(cfg.NATS.CredsFile)
		if err != nil {
			return nil, config.Config{}, err
		}
		if id.Tenant != "" && id.Tenant != tenant {
			return nil, config.Config{}, fmt.Errorf("the credential %s is for tenant %q, not %q", cfg.NATS.CredsFile, id.Tenant, tenant)
		}
	}
	if !g.verbose && logger.Core().Enabled(zapcore.InfoLevel) {
		logger = logger.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	}
	var nc *nats.Conn
	nc, err = app.Connect(cfg.NATS, "agentmem-cli", func(err error) {
		// A refused request is never answered: fail at once rather than at the
		// timeout, with the refusal as the command's error (newRoot).
		g.refuse(err)
		go nc.Close()
	}, logger)
	if err != nil {
		return nil, config.Config{}, fmt.Errorf("%w%s", err, hint)
	}
	return nc, cfg, nil
}

// checkID vets the id given as --flag ("" is left to the flag's own rules), so
// that a bad one is reported as the flag's, not as an invalid configuration.
func checkID(flag, id string) error {
	if id == "" {
		return nil
	}
	return events.ValidateID("--"+flag, id)
}

// withClient runs do with a client for tenant and a bounded context, and closes the
// connection afterwards. The client refuses events over the deployment's text
// limit (limits.max_text_bytes of the configuration) before publishing them.
func withClient(g *globalFlags, id ids, do func(ctx context.Context, cl *client.Client) error) error {
	nc, cfg, err := dial(g, id.tenant, " (is `agentmem up` running? set --nats-url; with `up --auth`, AGENTMEM_NATS_CREDS_FILE)")
	if err != nil {
		return err
	}
	defer nc.Close()
	agent := id.boundAgent
	if agent == "" {
		agent = "agentmem-cli"
	}
	cl, err := client.New(nc, client.Config{Tenant: id.tenant, AgentID: agent, MaxTextBytes: cfg.Limits.MaxTextBytes})
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout()
	defer cancel()
	err = do(ctx, cl)
	if errors.Is(err, events.ErrTooLarge) {
		return fmt.Errorf("%w (limits.max_text_bytes of the configuration; nothing was published)", err)
	}
	return err
}

// ids are the namespace flags of client commands, and the agent the configured
// credential is bound to ("" for none).
type ids struct{ tenant, user, session, boundAgent string }

// boundAgent is the agent the configured credential (nats.creds_file) is bound
// to by `creds add --agent`; "" without a credential or for an unbound one.
func boundAgent(g *globalFlags) (string, error) {
	cfg, _, err := loadConfig(g, map[string]string{})
	if err != nil || cfg.NATS.CredsFile == "" {
		return "", err
	}
	id, err := natsauth.InspectFile(cfg.NATS.CredsFile)
	return id.AgentID, err
}

// actingAgent is the agent a command acts as: the one its credential is bound to
// (a different --agent is an error: the server would refuse its writes), else
// the flag's.
func actingAgent(flag, bound string) (string, error) {
	if bound == "" {
		return flag, nil
	}
	if flag != "" && flag != bound {
		return "", fmt.Errorf("--agent %q, but the credential is bound to agent %q", flag, bound)
	}
	return bound, nil
}

func withTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// clientCommand describes a command that makes one call of the wire contract for a
// tenant's user: adding such a command is one entry of clientCommands.
type clientCommand struct {
	use, short string
	// session is the usage of the --session flag; "" for none.
	session         string
	sessionRequired bool
	// flags registers the command's own flags; required lists those it needs.
	flags    func(f *pflag.FlagSet)
	required []string
	// args, if set, takes the positional arguments (none are accepted otherwise).
	args func(args []string) error
	// check, if set, vets the flags before connecting.
	check func(id ids) error
	// userOptional leaves --user optional (a write to the agent or tenant
	// scope names no user); check then requires it where it is needed.
	userOptional bool
	// call makes the call and prints its result to out.
	call func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error
}

func (c clientCommand) command(g *globalFlags) *cobra.Command {
	var id ids
	cmd := &cobra.Command{
		Use:   c.use,
		Short: c.short,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := errors.Join(checkID("user", id.user), checkID("session", id.session)); err != nil {
				return err
			}
			if c.args != nil {
				if err := c.args(args); err != nil {
					return err
				}
			}
			var err error
			if id.boundAgent, err = boundAgent(g); err != nil {
				return err
			}
			if c.check != nil {
				if err := c.check(id); err != nil {
					return err
				}
			}
			return withClient(g, id, func(ctx context.Context, cl *client.Client) error {
				return c.call(ctx, cl, id, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&id.tenant, "tenant", "", "tenant id (required)")
	required := append([]string{"tenant"}, c.required...)
	if c.userOptional {
		f.StringVar(&id.user, "user", "", "user id (required for --scope user)")
	} else {
		f.StringVar(&id.user, "user", "", "user id (required)")
		required = append(required, "user")
	}
	if c.session != "" {
		f.StringVar(&id.session, "session", "", c.session)
		if c.sessionRequired {
			required = append(required, "session")
		}
	}
	if c.flags != nil {
		c.flags(f)
	}
	for _, name := range required {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// clientCommands are the commands that make one call for a tenant's user.
func clientCommands() []clientCommand {
	return []clientCommand{observeCmd(), endCmd(), contextCmd(), searchCmd(), appendCmd(), addCmd(), topicCmd(), compressCmd()}
}

func observeCmd() clientCommand {
	var (
		role, text string
		meta       []string
		m          map[string]any
	)
	return clientCommand{
		use: "observe", short: "Publish one message observation",
		session: "session id (required)", sessionRequired: true,
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&role, "role", "user", "user | assistant | tool | system")
			f.StringVar(&text, "text", "", "the message (required)")
			f.StringArrayVar(&meta, "meta", nil, "key=value kept in the observation's meta (repeatable)")
		},
		required: []string{"text"},
		check: func(ids) error {
			m = map[string]any{}
			for _, kv := range meta {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--meta %q: want key=value", kv)
				}
				m[k] = v
			}
			return nil
		},
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			return printID(out)(cl.Say(ctx, id.user, id.session, events.Role(role), text, m))
		},
	}
}

func endCmd() clientCommand {
	return clientCommand{
		use: "end", short: "Publish session_ended: the extractor turns the session into Markdown memory",
		session: "session id (required)", sessionRequired: true,
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			return printID(out)(cl.EndSession(ctx, id.user, id.session))
		},
	}
}

// printID prints the id of a published event.
func printID(out io.Writer) func(id string, err error) error {
	return func(id string, err error) error {
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, id)
		return err
	}
}

func contextCmd() clientCommand {
	var (
		query, agent        string
		asJSON, lightweight bool
	)
	return clientCommand{
		use: "context", short: "Ask the retriever for a context pack",
		session: "the asking session (its recent messages are included)",
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&query, "query", "", "what the agent is about to do")
			f.BoolVar(&asJSON, "json", false, "print the whole pack as JSON instead of its prompt")
			f.BoolVar(&lightweight, "lightweight", false, "core memory and session only, no search")
			f.StringVar(&agent, "agent", "", "agent id whose agent scope the pack includes (default the credential's agent, else agentmem-cli)")
		},
		check: func(ids) error { return checkID("agent", agent) },
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			pack, err := cl.Context(ctx, events.ContextRequest{UserID: id.user, AgentID: agent, SessionID: id.session, Query: query, Lightweight: lightweight})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, pack)
			}
			_, err = fmt.Fprintln(out, pack.Prompt)
			return err
		},
	}
}

func searchCmd() clientCommand {
	var (
		query, agent string
		limit        int
		types        []string
		asJSON       bool
	)
	return clientCommand{
		use: "search", short: "Search memories (Markdown chunks, episodic and semantic): a table, or JSON with --json",
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&query, "query", "", "search text (required)")
			f.IntVar(&limit, "limit", 10, "at most this many results")
			f.StringSliceVar(&types, "types", nil, "memory types: markdown, episodic, semantic, item (default all)")
			f.BoolVar(&asJSON, "json", false, "print the whole reply as JSON (text unclipped, metadata included)")
			f.StringVar(&agent, "agent", "", "agent id whose agent scope is searched too (default the credential's agent, else agentmem-cli)")
		},
		required: []string{"query"},
		check:    func(ids) error { return checkID("agent", agent) },
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			req := events.SearchRequest{UserID: id.user, AgentID: agent, Query: query, Limit: limit}
			for _, t := range types {
				req.MemoryTypes = append(req.MemoryTypes, events.MemoryType(t))
			}
			reply, err := cl.Search(ctx, req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, reply)
			}
			return writeSearchTable(out, reply)
		},
	}
}

// writeSearchTable prints a search reply for a person: one line per result, best
// first, its text on one clipped line; then what cut or degraded the search.
func writeSearchTable(out io.Writer, reply events.SearchReply) error {
	if len(reply.Results) == 0 {
		_, err := fmt.Fprintln(out, "no results")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SCORE\tSCOPE\tTYPE\tID\tSOURCE\tTEXT")
	for _, r := range reply.Results {
		fmt.Fprintf(w, "%.3f\t%s\t%s\t%s\t%s\t%s\n", r.Score, or(string(r.Scope), "-"), r.MemoryType, or(r.ID, "-"), or(r.Source, "-"), clip(r.Text, 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if reply.Truncated {
		fmt.Fprintln(out, "(the lowest-ranked results were cut to fit one message)")
	}
	for _, d := range reply.Degraded {
		fmt.Fprintf(out, "(degraded: %s)\n", d)
	}
	_, err := fmt.Fprintf(out, "%d result(s); --json for the whole reply\n", len(reply.Results))
	return err
}

// scopeFlags are the --scope and --agent flags of the write commands.
type scopeFlags struct{ scope, agent string }

// with returns c taking the scope flags: --user is then needed for the user
// scope only.
func (s *scopeFlags) with(c clientCommand) clientCommand {
	own := c.flags
	c.flags = func(f *pflag.FlagSet) {
		own(f)
		f.StringVar(&s.scope, "scope", "user", "user | agent | tenant: whose memory (tenant takes an admin credential)")
		f.StringVar(&s.agent, "agent", "", "agent id whose agent scope --scope agent writes (required for it, unless the credential is bound to an agent)")
	}
	c.userOptional, c.check = true, s.check
	return c
}

// check vets the flags with the command's ids: --user for the user scope,
// --agent for the agent scope.
func (s *scopeFlags) check(id ids) error {
	scope := events.MemoryScope(s.scope)
	agent, err := actingAgent(s.agent, id.boundAgent)
	if err != nil {
		return err
	}
	s.agent = agent
	switch {
	case !slices.Contains(events.MemoryScopes, scope):
		return fmt.Errorf("--scope %q: want one of user, agent, tenant", s.scope)
	case scope == events.MemoryScopeUser && id.user == "":
		return errors.New("--scope user needs --user")
	case scope == events.MemoryScopeAgent && s.agent == "":
		return errors.New("--scope agent needs --agent")
	}
	return checkID("agent", s.agent)
}

func appendCmd() clientCommand {
	var (
		content, slot string
		sf            scopeFlags
	)
	return sf.with(clientCommand{
		use: "append", short: "Append to MEMORY.md (long_term) or to today's daily note (today) of a user, an agent (--scope agent --agent A) or the tenant",
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&content, "content", "", "what to remember (required)")
			f.StringVar(&slot, "slot", "long_term", "long_term | today")
		},
		required: []string{"content"},
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			rep, err := cl.Append(ctx, events.AppendRequest{UserID: id.user, Content: content, Slot: events.Slot(slot), Scope: events.MemoryScope(sf.scope), AgentID: sf.agent})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "appended to %s\n", rep.File)
			return err
		},
	})
}

func addCmd() clientCommand {
	var (
		text, memoryType string
		sf               scopeFlags
	)
	return sf.with(clientCommand{
		use: "add", short: "Add a memory through the write decision, to a user, an agent (--scope agent --agent A) or the tenant; prints the new ids",
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&text, "text", "", "the memory (required)")
			f.StringVar(&memoryType, "type", "episodic", "episodic | semantic")
		},
		required: []string{"text"},
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			rep, err := cl.Add(ctx, events.AddRequest{UserID: id.user, Text: text, MemoryType: events.MemoryType(memoryType), Scope: events.MemoryScope(sf.scope), AgentID: sf.agent})
			if err != nil {
				return err
			}
			if len(rep.MemoryIDs) == 0 {
				_, err = fmt.Fprintln(out, "not added: the write decision declined it (trivial or already known)")
				return err
			}
			_, err = fmt.Fprintln(out, strings.Join(rep.MemoryIDs, "\n"))
			return err
		},
	})
}

func topicCmd() clientCommand {
	var topic string
	return clientCommand{
		use: "topic", short: "Print a topic file (file_patterns or user_prefs)",
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&topic, "topic", "", "file_patterns | user_prefs (required)")
		},
		required: []string{"topic"},
		call: func(ctx context.Context, cl *client.Client, id ids, out io.Writer) error {
			reply, err := cl.ReadTopic(ctx, events.TopicRequest{UserID: id.user, Topic: topic})
			if err != nil {
				return err
			}
			if reply.Content == "" {
				_, err = fmt.Fprintf(out, "topic %s of user %s is empty\n", topic, id.user)
				return err
			}
			_, err = fmt.Fprint(out, reply.Content)
			return err
		},
	}
}

func newDLQCmd(g *globalFlags) *cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "Inspect and replay dead letters (SPEC E7)"}
	var tenant string
	dlq.PersistentFlags().StringVar(&tenant, "tenant", "", "only this tenant's dead letters, through its dlq endpoints (the default with a tenant's admin credential); without it, every tenant's, through the JetStream API")
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDLQ(g, tenant, func(ctx context.Context, d dlqSource) error {
				dls, err := d.list(ctx, limit, "")
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				for _, dl := range dls {
					fmt.Fprintf(w, "%d\t%s\t%s\tworker=%s deliveries=%d\n\treason: %s\n", dl.Seq, dl.Time.Format(time.RFC3339), dl.Subject, dl.Worker, dl.Deliveries, dl.Reason)
				}
				fmt.Fprintf(w, "%d dead letter(s)\n", len(dls))
				return nil
			})
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	var all bool
	var reason string
	replay := &cobra.Command{
		Use:   "replay {SEQ... | --all | --reason CLASS}",
		Short: "Re-publish dead letters to their original subjects (after fixing the cause) and remove them from the list",
		Long: `replay re-publishes dead letters to their original subjects, each with a fresh
message id, and deletes each from the dead-letter stream once its publish is acked.
Name them by sequence (see dlq list), or take every one (--all) or every one of a
reason class (--reason malformed|max_deliveries|retries_exhausted|quota).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case reason != "" && !slices.Contains(bus.ReasonClasses, reason):
				return fmt.Errorf("--reason %q: want one of %s", reason, strings.Join(bus.ReasonClasses, ", "))
			case all && reason != "":
				return errors.New("give --all or --reason, not both")
			case (all || reason != "") && len(args) > 0:
				return errors.New("name the dead letters by sequence or select them with --all or --reason, not both")
			case !all && reason == "" && len(args) == 0:
				return errors.New("which dead letters? name them by sequence (see `agentmem dlq list`), or give --all or --reason CLASS")
			}
			seqs := make([]uint64, len(args))
			for i, arg := range args {
				seq, err := strconv.ParseUint(arg, 10, 64)
				if err != nil || seq == 0 {
					return fmt.Errorf("no dead letter with sequence %s (see `agentmem dlq list`)", arg)
				}
				seqs[i] = seq
			}
			out := cmd.OutOrStdout()
			return withDLQ(g, tenant, func(ctx context.Context, d dlqSource) error {
				replayed, err := d.replay(ctx, seqs, reason, func(seq uint64, subject string) {
					fmt.Fprintf(out, "replayed %d to %s\n", seq, subject)
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%d dead letter(s) replayed\n", replayed)
				return nil
			})
		},
	}
	replay.Flags().BoolVar(&all, "all", false, "replay every dead letter")
	replay.Flags().StringVar(&reason, "reason", "", "replay the dead letters of this reason class: "+strings.Join(bus.ReasonClasses, ", "))
	dlq.AddCommand(list, replay)
	return dlq
}

// dlqSource is where the dlq commands find dead letters: the dead-letter stream
// itself (js, every tenant's) or one tenant's dlq endpoints (cl), which a
// tenant's admin credential may request while the JetStream API is refused to it.
type dlqSource struct {
	js jetstream.JetStream
	cl *client.Client
}

// withDLQ runs do with the dlq source for tenant: the tenant's endpoints when
// tenant is set or the configured credential is a tenant's, else JetStream.
func withDLQ(g *globalFlags, tenant string, do func(ctx context.Context, d dlqSource) error) error {
	nc, cfg, err := dial(g, tenant, "")
	if err != nil {
		return err
	}
	defer nc.Close()
	if tenant == "" && cfg.NATS.CredsFile != "" {
		id, err := natsauth.InspectFile(cfg.NATS.CredsFile)
		if err != nil {
			return err
		}
		tenant = id.Tenant
	}
	var d dlqSource
	if tenant != "" {
		d.cl, err = client.New(nc, client.Config{Tenant: tenant, AgentID: "agentmem-cli"})
	} else {
		d.js, err = jetstream.New(nc)
	}
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout()
	defer cancel()
	return do(ctx, d)
}

// list returns up to limit dead letters of class ("" for all), oldest first.
func (d dlqSource) list(ctx context.Context, limit int, class string) ([]bus.DeadLetter, error) {
	if d.cl == nil {
		dls, err := bus.ListDeadLetters(ctx, d.js, bus.DefaultDLQStream, limit)
		return bus.SelectDeadLetters(dls, class), err
	}
	rep, err := d.cl.DeadLetters(ctx, events.DLQListRequest{Limit: limit, Reason: class})
	dls := make([]bus.DeadLetter, 0, len(rep.DeadLetters))
	for _, dl := range rep.DeadLetters {
		dls = append(dls, bus.DeadLetter{Seq: dl.Seq, Worker: dl.Worker, Subject: dl.Subject, Reason: dl.Reason,
			Class: dl.Class, Deliveries: dl.Deliveries, Data: dl.Data, Time: dl.StoredTS})
	}
	return dls, err
}

// replay replays the dead letters with sequences seqs, or (seqs empty) every one
// of class ("" for all), telling done of each; it returns how many it replayed.
func (d dlqSource) replay(ctx context.Context, seqs []uint64, class string, done func(seq uint64, subject string)) (int, error) {
	if d.cl != nil {
		n := 0
		for {
			rep, err := d.cl.ReplayDeadLetters(ctx, events.DLQReplayRequest{Seqs: seqs, All: len(seqs) == 0 && class == "", Reason: class})
			for _, r := range rep.Replayed {
				done(r.Seq, r.Subject)
			}
			n += len(rep.Replayed)
			if err != nil || !rep.More {
				return n, err
			}
		}
	}
	dls, err := d.list(ctx, math.MaxInt32, class)
	if err != nil {
		return 0, err
	}
	chosen := dls
	if len(seqs) > 0 {
		chosen = make([]bus.DeadLetter, 0, len(seqs))
		for _, seq := range seqs {
			i := slices.IndexFunc(dls, func(dl bus.DeadLetter) bool { return dl.Seq == seq })
			if i < 0 {
				return 0, fmt.Errorf("no dead letter with sequence %d (see `agentmem dlq list`)", seq)
			}
			chosen = append(chosen, dls[i])
		}
	}
	for i, dl := range chosen {
		if err := bus.ReplayDeadLetter(ctx, d.js, dl); err != nil {
			return i, err
		}
		done(dl.Seq, dl.Subject)
	}
	return len(chosen), nil
}
