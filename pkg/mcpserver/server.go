// Package mcpserver is agentmem as a Model Context Protocol server: the memory tools
// and the Markdown memory as resources, for one (tenant, user), on the official MCP Go
// SDK. It is a client like any other: every call goes over NATS through pkg/client
// to the retriever or the event stream, so it holds no memory logic of its own.
//
// The tenant and user are fixed when the server is built (flags or configuration
// for stdio; an authenticated bearer token for HTTP, see Tokens): no tool has a
// tenant or user argument, so a model cannot reach another user's memory.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// Tool names. memory_search, memory_append and memory_read_topic are the OpenAI
// tools of pkg/client, with the same names and arguments.
const (
	ToolContext   = "memory_context"
	ToolSearch    = client.ToolMemorySearch
	ToolAppend    = client.ToolMemoryAppend
	ToolReadTopic = client.ToolMemoryReadTopic
	ToolAdd       = "memory_add"
	ToolGet       = "memory_get"
	ToolUpdate    = "memory_update"
	ToolDelete    = "memory_delete"
	ToolHistory   = "memory_history"
	ToolEndSess   = "session_end"
)

// ResourceScheme starts the URI of every resource: agentmem://memory/MEMORY.md.
const ResourceScheme = "agentmem://memory/"

// ErrInvalidConfig reports a Config that cannot work; the message names the field.
var ErrInvalidConfig = errors.New("mcpserver: invalid config")

// Version is reported to MCP clients as the server implementation's version.
const Version = "1.0.0"

// Config is the identity a server speaks for.
type Config struct {
	// User is the user whose memory every tool reads and writes; required.
	User string
	// Name is the implementation name reported to clients; default "agentmem".
	Name string
	// Agent says the client's credential is a tenant agent's (natsauth.RoleAgent):
	// the tools of admin endpoints (memory_delete) are left out, since the NATS
	// server refuses their requests.
	Agent bool
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "agentmem"
	}
	return c
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	if err := events.ValidateID("User", c.User); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// New returns an MCP server with the memory tools and resources for cfg.User of
// cl's tenant. Run it with (*mcp.Server).Run on a transport, or serve many with
// Handler.
func New(cfg Config, cl *client.Client, logger *zap.Logger) (*mcp.Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cl == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	s := mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Title: "agentmem long-term memory", Version: Version}, &mcp.ServerOptions{
		Instructions: "Long-term memory of the user across sessions. Call memory_context at the start of a task to " +
			"learn what is known about the user and the task; memory_search to look something up; memory_append or " +
			"memory_add to remember a lasting fact; session_end when the conversation is over so that it is turned into memory.",
	})
	h := &handlers{cl: cl, user: cfg.User, agent: cfg.Agent, logger: logger.With(zap.String("tenant", cl.Tenant()), zap.String("user", cfg.User))}
	h.addTools(s)
	h.addResources(s)
	return s, nil
}

type handlers struct {
	cl     *client.Client
	user   string
	agent  bool // no tools of admin endpoints
	logger *zap.Logger
}

// object is the JSON Schema of a tool's arguments: exactly these properties.
func object(properties map[string]any, required ...string) map[string]any {
	if required == nil {
		required = []string{}
	}
	return map[string]any{"type": "object", "properties": properties, "required": required, "additionalProperties": false}
}

var memoryID = map[string]any{"type": "string", "minLength": 1, "description": "The memory's id, as memory_search or memory_add returned it."}

// text is a tool result holding one text.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// jsonResult is a tool result holding v as indented JSON.
func jsonResult(v any) (*mcp.CallToolResult, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return text(string(data)), nil
}

// failed turns an agentmem error into the tool error a model reads: what went
// wrong, and the retriever's own message naming the field.
func (h *handlers) failed(tool string, err error) error {
	h.logger.Debug("tool failed", zap.String("tool", tool), zap.Error(err))
	var rpcErr *client.Error
	if errors.As(err, &rpcErr) {
		switch {
		case errors.Is(err, client.ErrNotFound):
			return fmt.Errorf("%s: not found: %s", tool, rpcErr.Message)
		case errors.Is(err, client.ErrBadRequest):
			return fmt.Errorf("%s: invalid arguments: %s", tool, rpcErr.Message)
		}
		return fmt.Errorf("%s: agentmem failed (%s): %s", tool, rpcErr.Code, rpcErr.Message)
	}
	return fmt.Errorf("%s: %w", tool, err)
}

// openAITool adds one of pkg/client's OpenAI tools under its own name, schema and
// description, run by client.HandleToolCall.
func (h *handlers) openAITool(s *mcp.Server, def openai.Tool) {
	var schema map[string]any
	raw, _ := json.Marshal(def.Function.Parameters)
	_ = json.Unmarshal(raw, &schema)
	name := def.Function.Name
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: def.Function.Description, InputSchema: schema},
		func(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
			data, err := json.Marshal(args)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: encode arguments: %w", name, err)
			}
			out, err := h.cl.HandleToolCall(ctx, h.user, openai.ToolCall{Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: name, Arguments: string(data)}})
			if err != nil {
				return nil, nil, h.failed(name, err)
			}
			return text(out), nil, nil
		})
}

func (h *handlers) addTools(s *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{
		Name: ToolContext,
		Description: "Get what you should know about the user before working on a task: their long-term notes (MEMORY.md), " +
			"topic files, recent daily notes and the past conversations and facts relevant to the task, as one text to read. " +
			"Call it once at the start of a task, with the task in plain words as query.",
		Annotations: readOnly,
		InputSchema: object(map[string]any{
			"query":       map[string]any{"type": "string", "description": "The task or question at hand, e.g. \"chart last month's sales\"; leave it out for the core memory only."},
			"session_id":  map[string]any{"type": "string", "description": "This conversation's session id, to include its recent messages and summary."},
			"max_tokens":  map[string]any{"type": "integer", "minimum": 1, "description": "Upper bound on the size of the answer, in tokens."},
			"lightweight": map[string]any{"type": "boolean", "description": "true: only the core memory and the session, no search (faster, smaller)."},
		}),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		Query       string `json:"query"`
		SessionID   string `json:"session_id"`
		MaxTokens   int    `json:"max_tokens"`
		Lightweight bool   `json:"lightweight"`
	}) (*mcp.CallToolResult, any, error) {
		pack, err := h.cl.Context(ctx, events.ContextRequest{UserID: h.user, SessionID: a.SessionID, Query: a.Query, MaxTokens: a.MaxTokens, Lightweight: a.Lightweight})
		if err != nil {
			return nil, nil, h.failed(ToolContext, err)
		}
		if strings.TrimSpace(pack.Prompt) == "" {
			return text("Nothing is known about this user yet."), nil, nil
		}
		return text(pack.Prompt), nil, nil
	})

	for _, def := range client.Tools() {
		h.openAITool(s, def)
	}

	mcp.AddTool(s, &mcp.Tool{
		Name: ToolAdd,
		Description: "Remember one fact or event as a searchable memory. agentmem decides whether it is worth keeping " +
			"(an empty memory_ids means it was declined as trivial or already known). Use episodic for something that " +
			"happened, semantic for a lasting fact. Returns {\"memory_ids\":[...]}.",
		InputSchema: object(map[string]any{
			"text":        map[string]any{"type": "string", "minLength": 1, "description": "The memory, self-contained, e.g. \"Prefers bar charts for monthly sales.\""},
			"memory_type": map[string]any{"type": "string", "enum": []string{"episodic", "semantic"}, "description": "episodic (default) or semantic."},
			"metadata":    map[string]any{"type": "object", "description": "Optional JSON object kept with the memory."},
			"scope":       client.ScopeParameter,
		}, "text"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		Text       string             `json:"text"`
		MemoryType string             `json:"memory_type"`
		Metadata   map[string]any     `json:"metadata"`
		Scope      events.MemoryScope `json:"scope"`
	}) (*mcp.CallToolResult, any, error) {
		rep, err := h.cl.Add(ctx, events.AddRequest{UserID: h.user, Text: a.Text, MemoryType: events.MemoryType(a.MemoryType), Metadata: a.Metadata, Scope: a.Scope})
		if err != nil {
			return nil, nil, h.failed(ToolAdd, err)
		}
		if rep.MemoryIDs == nil {
			rep.MemoryIDs = []string{}
		}
		r, err := jsonResult(rep)
		return r, nil, err
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolGet,
		Description: "Read one memory by id: its text, type, times, hit count and metadata (including where it came from).",
		Annotations: readOnly,
		InputSchema: object(map[string]any{"id": memoryID}, "id"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		ID string `json:"id"`
	}) (*mcp.CallToolResult, any, error) {
		m, err := h.cl.Get(ctx, events.GetRequest{UserID: h.user, ID: a.ID})
		if err != nil {
			return nil, nil, h.failed(ToolGet, err)
		}
		r, err := jsonResult(m)
		return r, nil, err
	})

	mcp.AddTool(s, &mcp.Tool{
		Name: ToolUpdate,
		Description: "Correct a memory: replace its text and/or its metadata. Use it when the user says something " +
			"remembered is wrong or out of date. Returns the memory as stored.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
		InputSchema: object(map[string]any{
			"id":       memoryID,
			"text":     map[string]any{"type": "string", "minLength": 1, "description": "The corrected text."},
			"metadata": map[string]any{"type": "object", "description": "Metadata to set."},
		}, "id"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		ID       string         `json:"id"`
		Text     string         `json:"text"`
		Metadata map[string]any `json:"metadata"`
	}) (*mcp.CallToolResult, any, error) {
		m, err := h.cl.Update(ctx, events.UpdateRequest{UserID: h.user, ID: a.ID, Text: a.Text, Metadata: a.Metadata})
		if err != nil {
			return nil, nil, h.failed(ToolUpdate, err)
		}
		r, err := jsonResult(m)
		return r, nil, err
	})

	if !h.agent {
		h.addDelete(s)
	}

	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolHistory,
		Description: "List the changes of one memory, oldest first: when it was added, updated, merged or deleted, and the text each time.",
		Annotations: readOnly,
		InputSchema: object(map[string]any{"id": memoryID}, "id"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		ID string `json:"id"`
	}) (*mcp.CallToolResult, any, error) {
		rep, err := h.cl.History(ctx, events.HistoryRequest{UserID: h.user, ID: a.ID})
		if err != nil {
			return nil, nil, h.failed(ToolHistory, err)
		}
		r, err := jsonResult(rep)
		return r, nil, err
	})

	mcp.AddTool(s, &mcp.Tool{
		Name: ToolEndSess,
		Description: "End a conversation: agentmem then turns what was said in it into long-term memory (notes, topic files, " +
			"facts). Call it once, when the user is done.",
		InputSchema: object(map[string]any{
			"session_id": map[string]any{"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[A-Za-z0-9_-]+$", "description": "The session id of the conversation that ended."},
		}, "session_id"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		SessionID string `json:"session_id"`
	}) (*mcp.CallToolResult, any, error) {
		id, err := h.cl.EndSession(ctx, h.user, a.SessionID)
		if err != nil {
			return nil, nil, h.failed(ToolEndSess, err)
		}
		return text(fmt.Sprintf("Session %s ended (event %s); it will be turned into memory shortly.", a.SessionID, id)), nil, nil
	})
}

// addDelete adds memory_delete: the delete endpoint is an admin one
// (events.AdminEndpoints).
func (h *handlers) addDelete(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolDelete,
		Description: "Delete memories by id, for good. Use it only when the user asks to forget something. Returns {\"deleted\": n}.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), IdempotentHint: true},
		InputSchema: object(map[string]any{
			"ids": map[string]any{"type": "array", "minItems": 1, "maxItems": 100, "items": memoryID, "description": "The ids of the memories to delete."},
		}, "ids"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		IDs []string `json:"ids"`
	}) (*mcp.CallToolResult, any, error) {
		rep, err := h.cl.Delete(ctx, events.DeleteRequest{UserID: h.user, IDs: a.IDs})
		if err != nil {
			return nil, nil, h.failed(ToolDelete, err)
		}
		r, err := jsonResult(rep)
		return r, nil, err
	})
}

// addResources exposes MEMORY.md (the head a context pack carries) and the topic files.
func (h *handlers) addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI: ResourceScheme + "MEMORY.md", Name: "MEMORY.md", MIMEType: "text/markdown",
		Description: "The user's long-term notes (the head of MEMORY.md that every context carries).",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		pack, err := h.cl.Context(ctx, events.ContextRequest{UserID: h.user, Lightweight: true})
		if err != nil {
			return nil, h.failed("MEMORY.md", err)
		}
		content := ""
		if pack.Core != nil {
			content = pack.Core.Text
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: content}}}, nil
	})
	for _, topic := range events.Topics {
		name := topic + ".md"
		s.AddResource(&mcp.Resource{
			URI: ResourceScheme + name, Name: name, MIMEType: "text/markdown",
			Description: "Topic file " + name + " of the user's memory.",
		}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			rep, err := h.cl.ReadTopic(ctx, events.TopicRequest{UserID: h.user, Topic: topic})
			if err != nil {
				return nil, h.failed(name, err)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: rep.Content}}}, nil
		})
	}
}
