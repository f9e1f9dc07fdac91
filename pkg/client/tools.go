package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sashabaranov/go-openai"

	"github.com/agentmem/agentmem/events"
)

// Names of the tools Tools offers a model.
const (
	ToolMemorySearch    = "memory_search"
	ToolMemoryAppend    = "memory_append"
	ToolMemoryReadTopic = "memory_read_topic"
)

// Tool-call errors. HandleToolCall's error message is written so it can be handed
// back to the model as the tool's output, letting it correct the call.
var (
	ErrUnknownTool      = errors.New("unknown tool")
	ErrInvalidArguments = errors.New("invalid tool arguments")
)

// maxToolSearchLimit is lower than events.MaxLimit: a model that asks for a thousand
// memories only floods its own context window.
const maxToolSearchLimit = 50

// tool is one function offered to a model: its JSON Schema is both what the model
// sees and what HandleToolCall validates the model's arguments against.
type tool struct {
	name        string
	description string
	parameters  map[string]any
	run         func(ctx context.Context, c *Client, userID string, args []byte) (string, error)
}

var tools = []tool{
	{
		name: ToolMemorySearch,
		description: "Search the user's long-term memory (notes, facts and earlier conversations) for what is relevant to a question. " +
			"Use it before answering whenever the user refers to something from an earlier session, to their files, or to their preferences. " +
			"Returns the best matches first, as JSON: {\"results\":[{\"id\",\"text\",\"memory_type\",\"score\",\"source\"}]}; " +
			"id is what memory_get, memory_update and memory_delete take.",
		parameters: object(map[string]any{
			"query": map[string]any{
				"type": "string", "minLength": 1,
				"description": "What to look for, in plain words, e.g. \"columns of the sales files\".",
			},
			"limit": map[string]any{
				"type": "integer", "minimum": 1, "maximum": maxToolSearchLimit,
				"description": fmt.Sprintf("How many results to return, 1 to %d; leave it out for the memory's default.", maxToolSearchLimit),
			},
		}, "query"),
		run: runSearch,
	},
	{
		name: ToolMemoryAppend,
		description: "Write a note into the user's long-term memory so that future sessions know it. " +
			"Use it when the user asks you to remember something, or states a lasting fact about their files, work or preferences. " +
			"Write one short, self-contained fact per call, so that it makes sense without this conversation.",
		parameters: object(map[string]any{
			"content": map[string]any{
				"type": "string", "minLength": 1,
				"description": "The note, e.g. \"Sales files have columns date, product, qty.\"",
			},
			"slot": map[string]any{
				"type": "string", "enum": events.Slots,
				"description": "long_term (the default): the permanent memory, MEMORY.md. today: today's daily note, for what matters only for the next few days.",
			},
			"scope": ScopeParameter,
		}, "content"),
		run: runAppend,
	},
	{
		name: ToolMemoryReadTopic,
		description: "Read one topic file of the user's memory in full. " +
			"file_patterns: the structure of the user's files and tables (columns, types, row counts); read it before working with their files. " +
			"user_prefs: the user's preferred formats, chart styles and output habits; read it before producing output for them.",
		parameters: object(map[string]any{
			"topic": map[string]any{
				"type": "string", "enum": events.Topics,
				"description": "Which topic file to read.",
			},
		}, "topic"),
		run: runReadTopic,
	},
}

// object is the JSON Schema of a tool's arguments: an object with exactly these
// properties, so a misspelt argument is an error rather than silently ignored.
func object(properties map[string]any, required ...string) map[string]any {
	return map[string]any{
		"type":                 "object",
		"properties":           properties,
		"required":             required,
		"additionalProperties": false,
	}
}

// Tools returns the memory tools for OpenAI function calling: memory_search,
// memory_append and memory_read_topic. Pass them in ChatCompletionRequest.Tools and
// answer the model's tool calls with HandleToolCall.
func Tools() []openai.Tool {
	out := make([]openai.Tool, 0, len(tools))
	for _, t := range tools {
		// The schemas are static maps of strings, numbers and string slices, so
		// Marshal cannot fail; a raw message keeps the caller from mutating them.
		params, _ := json.Marshal(t.parameters)
		out = append(out, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        t.name,
				Description: t.description,
				Parameters:  json.RawMessage(params),
			},
		})
	}
	return out
}

// compiledSchemas compiles every tool's parameters once.
var compiledSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	out := make(map[string]*jsonschema.Schema, len(tools))
	for _, t := range tools {
		// Round-trip through JSON: the compiler wants plain JSON values, not []events.Slot.
		raw, err := json.Marshal(t.parameters)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			return nil, err
		}
		url := "urn:agentmem:tool:" + t.name
		if err := compiler.AddResource(url, doc); err != nil {
			return nil, err
		}
		if out[t.name], err = compiler.Compile(url); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// HandleToolCall runs a model's call of one of Tools for userID and returns the
// text to hand back to the model as the tool's output. An unknown tool or arguments
// that break the tool's schema give an error (ErrUnknownTool, ErrInvalidArguments)
// naming the problem; the retriever's own errors come back as *Error.
func (c *Client) HandleToolCall(ctx context.Context, userID string, call openai.ToolCall) (string, error) {
	if call.Type != "" && call.Type != openai.ToolTypeFunction {
		return "", fmt.Errorf("%w: call %s has type %q; only %q tools exist", ErrUnknownTool, call.ID, call.Type, openai.ToolTypeFunction)
	}
	name := call.Function.Name
	idx := slices.IndexFunc(tools, func(t tool) bool { return t.name == name })
	if idx < 0 {
		return "", fmt.Errorf("%w: %q; the memory tools are %s, %s and %s", ErrUnknownTool, name, ToolMemorySearch, ToolMemoryAppend, ToolMemoryReadTopic)
	}
	schemas, err := compiledSchemas()
	if err != nil {
		return "", fmt.Errorf("%w: compile the schema of %s: %w", ErrInvalidArguments, name, err)
	}
	args := strings.TrimSpace(call.Function.Arguments)
	if args == "" {
		args = "{}"
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return "", fmt.Errorf("%w: %s: arguments are not a JSON object: %w", ErrInvalidArguments, name, err)
	}
	if err := schemas[name].Validate(doc); err != nil {
		return "", fmt.Errorf("%w: %s: %s", ErrInvalidArguments, name, describeViolations(err))
	}
	return tools[idx].run(ctx, c, userID, []byte(args))
}

// describeViolations turns a schema validation error into one line per broken rule,
// without the schema URL noise of jsonschema's own message.
func describeViolations(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var parts []string
	for _, unit := range ve.BasicOutput().Errors {
		if unit.Error == nil {
			continue
		}
		at := strings.TrimPrefix(unit.InstanceLocation, "/")
		if at == "" {
			at = "arguments"
		}
		parts = append(parts, at+": "+unit.Error.String())
	}
	if len(parts) == 0 {
		return err.Error()
	}
	return strings.Join(parts, "; ")
}

// searchHit is what the model sees of a search result: the id, which the other
// memory tools take, but not the metadata, which only costs it tokens.
type searchHit struct {
	ID         string             `json:"id"`
	Text       string             `json:"text"`
	Context    []string           `json:"context,omitempty"` // an episode's earlier messages, apart from its statement
	MemoryType events.MemoryType  `json:"memory_type"`
	Score      float64            `json:"score"`
	Source     string             `json:"source,omitempty"`
	Scope      events.MemoryScope `json:"scope"`
}

func runSearch(ctx context.Context, c *Client, userID string, args []byte) (string, error) {
	var a struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidArguments, ToolMemorySearch, err)
	}
	rep, err := c.Search(ctx, events.SearchRequest{UserID: userID, Query: a.Query, Limit: a.Limit})
	if err != nil {
		return "", err
	}
	hits := make([]searchHit, 0, len(rep.Results))
	for _, r := range rep.Results {
		hits = append(hits, searchHit{ID: r.ID, Text: r.Text, Context: r.Context, MemoryType: r.MemoryType, Score: r.Score, Source: r.Source, Scope: r.Scope})
	}
	out, err := json.Marshal(map[string][]searchHit{"results": hits})
	if err != nil {
		return "", fmt.Errorf("%w: %s: encode results: %w", ErrBadReply, ToolMemorySearch, err)
	}
	return string(out), nil
}

// ScopeParameter is the scope argument of the write tools (memory_append,
// memory_add): the agent is the client's (its configuration, never an
// argument), the tenant scope takes an admin credential.
var ScopeParameter = map[string]any{
	"type": "string", "enum": events.MemoryScopes,
	"description": "user (the default): this user's memory. agent: your own know-how for every user (a procedure, a tool's quirk, an error and its fix), never anything about this user. " +
		"tenant: knowledge shared by every agent and user of the team (needs an admin credential).",
}

func runAppend(ctx context.Context, c *Client, userID string, args []byte) (string, error) {
	var a struct {
		Content string             `json:"content"`
		Slot    events.Slot        `json:"slot"`
		Scope   events.MemoryScope `json:"scope"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidArguments, ToolMemoryAppend, err)
	}
	rep, err := c.Append(ctx, events.AppendRequest{UserID: userID, Content: a.Content, Slot: a.Slot, Scope: a.Scope})
	if err != nil {
		return "", err
	}
	where := ""
	if s := a.Scope.Effective(); s != events.MemoryScopeUser {
		where = " of the " + string(s) + " scope"
	}
	if rep.Slot == events.SlotToday {
		return "Saved to today's daily note" + where + ".", nil
	}
	return "Saved to long-term memory (MEMORY.md)" + where + ".", nil
}

func runReadTopic(ctx context.Context, c *Client, userID string, args []byte) (string, error) {
	var a struct {
		Topic string `json:"topic"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidArguments, ToolMemoryReadTopic, err)
	}
	rep, err := c.ReadTopic(ctx, events.TopicRequest{UserID: userID, Topic: a.Topic})
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(rep.Content) == "" {
		return fmt.Sprintf("Nothing has been recorded under %s yet.", a.Topic), nil
	}
	return rep.Content, nil
}
