package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/sashabaranov/go-openai"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// An agent records a session, ends it, and later asks for context in a new one. It
// needs a running agentmem (`agentmem up`), so it has no Output and is only compiled.
func Example() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	mem, err := client.New(nc, client.Config{Tenant: "acme", AgentID: "excel-bot"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if _, err := mem.Say(ctx, "u1", "s1", events.RoleUser, "Remember: my sales files have columns date, product, qty.", map[string]any{"dia_id": "D1:3"}); err != nil {
		log.Fatal(err)
	}
	if _, err := mem.EndSession(ctx, "u1", "s1"); err != nil {
		log.Fatal(err)
	}

	pack, err := mem.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s2", Query: "which columns do my sales files have?"})
	if err != nil {
		log.Fatal(err) // an *client.Error carries the retriever's code and message
	}
	fmt.Println(pack.Prompt)
}

// A model gets the memory tools; its tool calls are answered with HandleToolCall.
func ExampleClient_HandleToolCall() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	mem, err := client.New(nc, client.Config{Tenant: "acme"})
	if err != nil {
		log.Fatal(err)
	}
	req := openai.ChatCompletionRequest{Model: openai.GPT4o, Tools: client.Tools()}
	_ = req // send it; for each tool call in the reply:
	call := openai.ToolCall{ID: "call_1", Type: openai.ToolTypeFunction,
		Function: openai.FunctionCall{Name: client.ToolMemoryReadTopic, Arguments: `{"topic":"file_patterns"}`}}
	out, err := mem.HandleToolCall(context.Background(), "u1", call)
	if err != nil {
		out = err.Error() // tell the model what was wrong, so it can correct the call
	}
	fmt.Println(out) // goes back as the content of a "tool" message with ToolCallID call.ID
}
