package client_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sashabaranov/go-openai"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/client"
)

func call(name, args string) openai.ToolCall {
	return openai.ToolCall{ID: "call_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name, Arguments: args}}
}

// compileTool compiles a tool's parameters as a draft 2020-12 JSON Schema, which
// also checks them against the meta-schema.
func compileTool(t *testing.T, tool openai.Tool) *jsonschema.Schema {
	t.Helper()
	raw, err := json.Marshal(tool.Function.Parameters)
	if err != nil {
		t.Fatalf("%s: marshal parameters: %v", tool.Function.Name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("%s: parameters are not JSON: %v", tool.Function.Name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "urn:test:" + tool.Function.Name
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", tool.Function.Name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: parameters are not a valid JSON Schema: %v", tool.Function.Name, err)
	}
	return sch
}

func TestToolsAreValidFunctionDefinitions(t *testing.T) {
	tools := client.Tools()
	var names []string
	for _, tool := range tools {
		if tool.Type != openai.ToolTypeFunction || tool.Function == nil {
			t.Fatalf("tool %+v is not a function tool", tool)
		}
		names = append(names, tool.Function.Name)
		if len(tool.Function.Description) < 40 {
			t.Errorf("%s: description %q is too thin for a model to choose the tool", tool.Function.Name, tool.Function.Description)
		}
		sch := compileTool(t, tool)
		var params struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		}
		raw, _ := json.Marshal(tool.Function.Parameters)
		if err := json.Unmarshal(raw, &params); err != nil || params.Type != "object" {
			t.Fatalf("%s: parameters are not an object schema: %s", tool.Function.Name, raw)
		}
		for name, prop := range params.Properties {
			if d, _ := prop["description"].(string); d == "" {
				t.Errorf("%s: property %s has no description", tool.Function.Name, name)
			}
		}
		// The schema rejects an empty object when something is required.
		if len(params.Required) > 0 && sch.Validate(map[string]any{}) == nil {
			t.Errorf("%s: schema accepts {} although %v are required", tool.Function.Name, params.Required)
		}
	}
	if want := []string{client.ToolMemorySearch, client.ToolMemoryAppend, client.ToolMemoryReadTopic}; !slices.Equal(names, want) {
		t.Errorf("tools are %v, want %v", names, want)
	}
	// The enums are the contract's, so a new topic or slot reaches the model.
	raw, _ := json.Marshal(tools[2].Function.Parameters)
	var topic struct {
		Properties struct {
			Topic struct {
				Enum []string `json:"enum"`
			} `json:"topic"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &topic); err != nil || !slices.Equal(topic.Properties.Topic.Enum, events.Topics) {
		t.Errorf("memory_read_topic enum is %v, want events.Topics %v", topic.Properties.Topic.Enum, events.Topics)
	}
	// Callers may edit what Tools returned without changing the next call's answer.
	tools[0].Function.Name = "changed"
	if client.Tools()[0].Function.Name != client.ToolMemorySearch {
		t.Error("Tools returns shared state")
	}
}

func TestHandleToolCallRejectsBadCallsBeforeAsking(t *testing.T) {
	// No retriever runs: a call that got past validation would fail with
	// ErrNoRetriever instead of the error the case expects.
	c := newClient(t, bustest.Connect(t, bustest.StartServer(t)))
	ctx := testContext(t)
	cases := []struct {
		name    string
		call    openai.ToolCall
		want    error
		mention string
	}{
		{"unknown tool", call("memory_forget", `{}`), client.ErrUnknownTool, "memory_forget"},
		{"not a function", openai.ToolCall{Type: "retrieval", Function: openai.FunctionCall{Name: client.ToolMemorySearch}}, client.ErrUnknownTool, "retrieval"},
		{"arguments not JSON", call(client.ToolMemorySearch, `{"query":`), client.ErrInvalidArguments, "not a JSON object"},
		{"arguments an array", call(client.ToolMemorySearch, `["sales"]`), client.ErrInvalidArguments, "arguments"},
		{"missing query", call(client.ToolMemorySearch, `{"limit":3}`), client.ErrInvalidArguments, "query"},
		{"no arguments at all", call(client.ToolMemorySearch, ``), client.ErrInvalidArguments, "query"},
		{"empty query", call(client.ToolMemorySearch, `{"query":""}`), client.ErrInvalidArguments, "query"},
		{"limit zero", call(client.ToolMemorySearch, `{"query":"sales","limit":0}`), client.ErrInvalidArguments, "limit"},
		{"limit too large", call(client.ToolMemorySearch, `{"query":"sales","limit":51}`), client.ErrInvalidArguments, "limit"},
		{"limit as a string", call(client.ToolMemorySearch, `{"query":"sales","limit":"5"}`), client.ErrInvalidArguments, "limit"},
		{"limit fractional", call(client.ToolMemorySearch, `{"query":"sales","limit":2.5}`), client.ErrInvalidArguments, "limit"},
		{"misspelt argument", call(client.ToolMemorySearch, `{"query":"sales","limt":5}`), client.ErrInvalidArguments, "limt"},
		{"append without content", call(client.ToolMemoryAppend, `{"slot":"today"}`), client.ErrInvalidArguments, "content"},
		{"append to an unknown slot", call(client.ToolMemoryAppend, `{"content":"x","slot":"forever"}`), client.ErrInvalidArguments, "slot"},
		{"topic outside the whitelist", call(client.ToolMemoryReadTopic, `{"topic":"../../etc/passwd"}`), client.ErrInvalidArguments, "topic"},
		{"topic missing", call(client.ToolMemoryReadTopic, `{}`), client.ErrInvalidArguments, "topic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.HandleToolCall(ctx, "u1", tc.call)
			if !errors.Is(err, tc.want) || out != "" {
				t.Fatalf("HandleToolCall = %q, %v; want an error wrapping %v", out, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not name %q", err, tc.mention)
			}
		})
	}
}

// TestPropertyReadTopicLetsOnlyWhitelistedTopicsThrough: a model's topic reaches
// the retriever exactly when it is one of events.Topics; anything else is an
// argument error that never leaves the process.
func TestPropertyReadTopicLetsOnlyWhitelistedTopicsThrough(t *testing.T) {
	c := newClient(t, bustest.Connect(t, bustest.StartServer(t)))
	ctx := testContext(t)
	rapid.Check(t, func(rt *rapid.T) {
		topic := rapid.OneOf(rapid.SampledFrom(events.Topics), rapid.String(), rapid.StringMatching(`[a-z_./]{0,20}`)).Draw(rt, "topic")
		args, _ := json.Marshal(map[string]string{"topic": topic})
		_, err := c.HandleToolCall(ctx, "u1", call(client.ToolMemoryReadTopic, string(args)))
		if slices.Contains(events.Topics, topic) {
			if !errors.Is(err, client.ErrNoRetriever) {
				rt.Fatalf("topic %q: error %v, want the request to go out (ErrNoRetriever: none runs)", topic, err)
			}
		} else if !errors.Is(err, client.ErrInvalidArguments) {
			rt.Fatalf("topic %q: error %v, want ErrInvalidArguments", topic, err)
		}
	})
}

func TestRequestWithoutRetrieverSaysSo(t *testing.T) {
	_, nc, _ := bustest.Provisioned(t)
	c := newClient(t, nc)
	_, err := c.Context(testContext(t), events.ContextRequest{UserID: "u1", Query: "sales"})
	if !errors.Is(err, client.ErrNoRetriever) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("error is %v, want ErrNoRetriever wrapping nats.ErrNoResponders", err)
	}
	for _, want := range []string{"memrpc.acme.context", "is the retriever running?"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var rpcErr *client.Error
	if errors.As(err, &rpcErr) {
		t.Errorf("no responders became a retriever *Error %+v", rpcErr)
	}
}
