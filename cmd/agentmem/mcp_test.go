package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/mcpserver"
)

// `agentmem mcp --tenant acme --user u1` as a real subprocess speaks MCP on stdio
// against a running stack: stdout carries JSON-RPC only (the SDK's client rejects
// anything else), logs go to stderr.
func TestMCPStdioSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agentmem")
	}
	stack, _ := apptest.Up(t)
	bin := buildAgentmem(t)
	cmd := exec.Command(bin, "--nats-url", stack.ClientURL(), "mcp", "--tenant", "acme", "--user", "u1")
	cmd.Env = append(os.Environ(), "AGENTMEM_CONFIG=", "AGENTMEM_LOG_LEVEL=debug")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}
	if got := cs.InitializeResult().ServerInfo.Name; got != "agentmem" {
		t.Errorf("server name %q", got)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 10 {
		t.Fatalf("tools: %v %d", err, len(tools.Tools))
	}
	for _, tool := range tools.Tools {
		props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
		for p := range props {
			if strings.Contains(p, "user") || strings.Contains(p, "tenant") {
				t.Errorf("%s takes %q", tool.Name, p)
			}
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolAppend, Arguments: map[string]any{"content": "Stdio works."}})
	if err != nil || res.IsError {
		t.Fatalf("append: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolContext, Arguments: map[string]any{"lightweight": true}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "Stdio works.") {
		t.Fatalf("context: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolGet, Arguments: map[string]any{"id": "00000000-0000-0000-0000-000000000001"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "not found") {
		t.Fatalf("get of a missing memory: %v %+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if !strings.Contains(stderr.String(), "mcp server on stdio") {
		t.Errorf("stderr has no log line:\n%s", stderr.String())
	}
}

// buildAgentmem builds this command into a temporary directory.
func buildAgentmem(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentmem")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Issue 31: `agentmem mcp` with a credential bound to agent billing acts as
// billing: memory_append of scope agent (the tool takes no agent) lands in
// billing's scope; an --agent naming another agent is refused at start.
func TestMCPActsAsItsCredentialsAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agentmem")
	}
	stack, cfg, auth := apptest.UpAuth(t)
	bin := buildAgentmem(t)
	env := append(os.Environ(), "AGENTMEM_CONFIG=", "AGENTMEM_NATS_CREDS_FILE="+apptest.AgentCreds(t, auth, "acme", "billing"))
	base := []string{"--nats-url", stack.ClientURL(), "mcp", "--tenant", "acme", "--user", "u1"}

	refused := exec.Command(bin, append(base, "--agent", "support")...)
	refused.Env = env
	if out, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(out), `bound to agent "billing"`) {
		t.Fatalf("mcp --agent support with billing's credential: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, base...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}
	defer func() { _ = cs.Close() }()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolAppend, Arguments: map[string]any{"content": "Billing exports need the utf8 flag.", "scope": "agent"}})
	if err != nil || res.IsError {
		t.Fatalf("append of scope agent: %v %+v\nstderr:\n%s", err, res, stderr.String())
	}
	doc, err := os.ReadFile(filepath.Join(cfg.Memory.Dir, "acme", events.AgentOwner("billing"), "MEMORY.md"))
	if err != nil || !strings.Contains(string(doc), "utf8 flag") {
		t.Fatalf("billing's scope: %v\n%s", err, doc)
	}
}

func TestMCPFlags(t *testing.T) {
	for _, args := range [][]string{{"mcp"}, {"mcp", "--tenant", "acme"}, {"mcp", "--http", "127.0.0.1:0"}, {"mcp", "--http", "127.0.0.1:0", "--tenant", "a", "--user", "u"}} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
