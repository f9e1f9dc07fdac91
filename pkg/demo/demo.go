// Package demo runs agentmem end to end on a sample conversation shipped with the
// project: an all-in-one stack on a temporary directory, three sessions of an
// analyst talking to a spreadsheet assistant (a file structure, preferences, an
// error and its fix, a "remember", chit-chat), the Markdown memory the pipeline
// extracted, and the context pack a new session gets for a follow-up question.
package demo

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/docstore"
)

//go:embed conversation.json
var conversationJSON []byte

// Conversation is the sample data.
type Conversation struct {
	Tenant   string    `json:"tenant"`
	UserID   string    `json:"user_id"`
	AgentID  string    `json:"agent_id"`
	Sessions []Session `json:"sessions"`
	FollowUp struct {
		SessionID string `json:"session_id"`
		Query     string `json:"query"`
	} `json:"follow_up"`
}

// Session is one chat of the sample.
type Session struct {
	ID       string    `json:"id"`
	Start    time.Time `json:"start"`
	Messages []struct {
		Role events.Role `json:"role"`
		Text string      `json:"text"`
	} `json:"messages"`
}

// Sample returns the conversation shipped with the project.
func Sample() (Conversation, error) {
	var c Conversation
	if err := json.Unmarshal(conversationJSON, &c); err != nil {
		return Conversation{}, fmt.Errorf("demo: sample conversation: %w", err)
	}
	return c, nil
}

// Result is what a demo run produced, for tests and for printing.
type Result struct {
	Files map[string]string // Markdown memory, by file name
	Pack  events.ContextPack
}

// Run starts a stack in dataDir (a temporary directory when empty), replays the sample,
// waits for the pipeline and writes what it produced to out.
func Run(ctx context.Context, dataDir string, out io.Writer, logger *zap.Logger) (Result, error) {
	conv, err := Sample()
	if err != nil {
		return Result{}, err
	}
	if dataDir == "" {
		tmp, err := os.MkdirTemp("", "agentmem-demo-")
		if err != nil {
			return Result{}, fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(tmp)
		dataDir = tmp
	}
	// The demo listens nowhere: no port of the machine is taken.
	cfg, err := config.Load("", []string{"AGENTMEM_DATA_DIR=" + dataDir, "AGENTMEM_HTTP_LISTEN="})
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	fmt.Fprintf(out, "== starting agentmem in-process (embedded NATS, embedded vector store, Markdown under %s)\n", cfg.Memory.Dir)
	stack, err := app.Up(ctx, cfg, app.UpOptions{}, logger)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = stack.Close() }()

	nc, err := nats.Connect("", nats.InProcessServer(stack.Server()), nats.Name("agentmem-demo"))
	if err != nil {
		return Result{}, fmt.Errorf("demo: connect: %w", err)
	}
	defer nc.Close()
	cl, err := client.New(nc, client.Config{Tenant: conv.Tenant, AgentID: conv.AgentID})
	if err != nil {
		return Result{}, err
	}
	for _, s := range conv.Sessions {
		fmt.Fprintf(out, "== session %s: %d messages, then session_ended\n", s.ID, len(s.Messages))
		for i, m := range s.Messages {
			env := events.New(events.TypeObservation, conv.Tenant, conv.UserID, conv.AgentID, s.ID)
			env.TS = s.Start.Add(time.Duration(i) * time.Minute)
			env.Observation = &events.Observation{Role: m.Role, Text: m.Text, Meta: map[string]any{"turn": i + 1}}
			if err := cl.Publish(ctx, env); err != nil {
				return Result{}, err
			}
		}
		end := events.New(events.TypeSessionEnded, conv.Tenant, conv.UserID, conv.AgentID, s.ID)
		end.TS = s.Start.Add(time.Duration(len(s.Messages)) * time.Minute)
		if err := cl.Publish(ctx, end); err != nil {
			return Result{}, err
		}
	}
	fmt.Fprintln(out, "== waiting for ingest, extractor and consolidator to drain")
	waitCtx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := app.WaitIdle(waitCtx, stack.Runtime().JS, 25*time.Millisecond); err != nil {
		return Result{}, err
	}

	res := Result{Files: map[string]string{}}
	ns := docstore.Namespace{Tenant: conv.Tenant, User: conv.UserID}
	docs := stack.Runtime().Docs
	names, err := docs.Files(ctx, ns)
	if err != nil {
		return Result{}, err
	}
	for _, name := range names {
		data, err := docs.ReadFile(ctx, ns, name)
		if err != nil {
			return Result{}, err
		}
		res.Files[name] = string(data)
		fmt.Fprintf(out, "\n----- %s/%s/%s\n%s", conv.Tenant, conv.UserID, name, data)
	}

	res.Pack, err = cl.Context(ctx, events.ContextRequest{UserID: conv.UserID, AgentID: conv.AgentID, SessionID: conv.FollowUp.SessionID, Query: conv.FollowUp.Query})
	if err != nil {
		return Result{}, err
	}
	c := res.Pack.Counts
	fmt.Fprintf(out, "\n== context pack for a new session, query %q\n", conv.FollowUp.Query)
	fmt.Fprintf(out, "   core: %t, topics: %d, chunks: %d, daily notes: %d, episodic: %d, semantic: %d, ~%d tokens\n\n",
		res.Pack.Core != nil, c.Topics, c.Chunks, c.DailyNotes, c.EpisodicItems, c.SemanticItems, res.Pack.TokenEstimate)
	fmt.Fprintln(out, indent(res.Pack.Prompt))
	fmt.Fprintf(out, "\n== done in %.1fs\n", time.Since(start).Seconds())
	return res, nil
}

func indent(s string) string {
	return "   | " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   | ")
}
