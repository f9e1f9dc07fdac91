package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/policy"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, path string, env ...string) Config {
	t.Helper()
	c, err := Load(path, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	t.Setenv("HOME", "/home/agent")
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	want := map[string]any{
		"data_dir":                          "/home/agent/.agentmem",
		"memory.dir":                        "/home/agent/.agentmem/memory",
		"memory.enabled":                    true,
		"memory.auto_load_lines":            200,
		"memory.backend":                    "filesystem",
		"memory.max_lines":                  500,
		"memory.target_lines":               400,
		"memory.backups_keep":               20,
		"memory.context_window_tokens":      8192,
		"memory.context_budget_tokens":      2000,
		"memory.context_budget_percent":     0,
		"memory.compress_max_token_loss":    0,
		"memory.agent_learning":             false,
		"nats.url":                          "nats://127.0.0.1:4222",
		"nats.embedded.store_dir":           "/home/agent/.agentmem/nats",
		"nats.stream.max_age":               time.Duration(0),
		"nats.stream.duplicate_window":      2 * time.Minute,
		"nats.stream.replicas":              1,
		"nats.consumer.ack_wait":            30 * time.Second,
		"nats.consumer.max_deliver":         5,
		"nats.consumer.backoff":             []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute},
		"llm.base_url":                      "",
		"llm.timeout":                       60 * time.Second,
		"llm.max_retries":                   3,
		"llm.decide_batch_size":             16,
		"embed.provider":                    "local",
		"embed.dimensions":                  384,
		"embed.batch_size":                  64,
		"embed.query_cache_size":            4096,
		"vector.backend":                    "embedded",
		"vector.path":                       "/home/agent/.agentmem/vectors.db",
		"vector.max_loaded_records":         100000,
		"vector.collection":                 "memories",
		"vector.k_episodic":                 5,
		"vector.k_semantic":                 5,
		"vector.merge_threshold":            0.85,
		"vector.separate_threshold":         0.65,
		"vector.same_chat_window":           30 * time.Minute,
		"vector.cross_chat_window":          168 * time.Hour,
		"vector.consolidate_interval":       10 * time.Minute,
		"vector.semantic_expansion":         true,
		"vector.semantic_rerank":            true,
		"vector.fusion":                     "keyword",
		"search.min_score":                  0.01,
		"ingest.concurrency":                512,
		"ingest.batch_size":                 128,
		"ingest.batch_linger":               5 * time.Millisecond,
		"ingest.context_messages":           2,
		"http.listen":                       "127.0.0.1:9090",
		"log.level":                         "info",
		"log.format":                        "json",
		"runtime.gc_min_heap_mb":            128,
		"memory.retrieve_limit":             10,
		"memory.evolution_enabled":          false,
		"memory.session_summary_keep_count": 4,
	}
	got := c.flatten()
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if c.Memory.Policy != policy.Defaults() {
		t.Errorf("memory policy = %+v, want policy.Defaults()", c.Memory.Policy)
	}
	if loaded := mustLoad(t, ""); !reflect.DeepEqual(loaded, c) {
		t.Errorf("Load with no file and no environment = %+v, want Default()", loaded)
	}
}

const sampleYAML = `
data_dir: /srv/agentmem
memory:
  auto_load_lines: 50
  backend: jetstream
  retrieve_limit: 4
  evolution_enabled: true
nats:
  url: nats://nats-1:4222,nats://nats-2:4222
  tls:
  consumer:
    ack_wait: 45s
    backoff: [45s, 10m]
llm:
  base_url: http://llm.local/v1
  model: small
vector:
  merge_threshold: 0.9
  cross_chat_window: 72h
`

func TestFileOverridesDefaults(t *testing.T) {
	c := mustLoad(t, writeFile(t, "agentmem.yaml", sampleYAML))
	if c.Memory.AutoLoadLines != 50 || c.Memory.Backend != "jetstream" || c.NATS.URL != "nats://nats-1:4222,nats://nats-2:4222" ||
		c.NATS.Consumer.AckWait != 45*time.Second || !reflect.DeepEqual(c.NATS.Consumer.Backoff, []time.Duration{45 * time.Second, 10 * time.Minute}) ||
		c.LLM.BaseURL != "http://llm.local/v1" || c.Vector.MergeThreshold != 0.9 || c.Vector.CrossChatWindow != 72*time.Hour {
		t.Fatalf("file values not applied: %+v", c)
	}
	if c.Memory.MaxLines != 500 || c.NATS.Consumer.MaxDeliver != 5 {
		t.Errorf("keys absent from the file lost their defaults: %+v", c)
	}
	// Paths left empty follow data_dir.
	if c.Memory.Dir != "/srv/agentmem/memory" || c.Vector.Path != "/srv/agentmem/vectors.db" || c.NATS.Embedded.StoreDir != "/srv/agentmem/nats" {
		t.Errorf("derived paths: %q %q %q", c.Memory.Dir, c.Vector.Path, c.NATS.Embedded.StoreDir)
	}
}

func TestMemoryBlockFeedsPolicy(t *testing.T) {
	c := mustLoad(t, writeFile(t, "agentmem.yaml", sampleYAML), "AGENTMEM_MEMORY_RECENT_DAYS=9")
	want := policy.Defaults()
	want.RetrieveLimit, want.EvolutionEnabled, want.RecentDays = 4, true, 9
	if c.Memory.Policy != want {
		t.Fatalf("policy = %+v, want %+v", c.Memory.Policy, want)
	}
	// The namespace overrides go on top of the configured policy, and without them it is back.
	over, err := c.Memory.Policy.Overlay([]byte(`{"recent_days": 1}`))
	if err != nil || over.RecentDays != 1 || over.RetrieveLimit != 4 {
		t.Fatalf("overlay = %+v, %v", over, err)
	}
}

func TestEnvironmentOverridesFile(t *testing.T) {
	c := mustLoad(t, writeFile(t, "agentmem.yaml", sampleYAML),
		"AGENTMEM_MEMORY_AUTO_LOAD_LINES=77",
		"AGENTMEM_MEMORY_DIR=/var/mem",
		"AGENTMEM_NATS_URL=tls://secure:4222",
		"AGENTMEM_LLM_BASE_URL=https://api.example/v1",
		"AGENTMEM_LLM_MODEL=big",
		"AGENTMEM_LLM_API_KEY=sk-env",
		"AGENTMEM_NATS_CONSUMER_BACKOFF=45s,2m,3m",
		"AGENTMEM_CONFIG=/ignored/because/binaries/read/it",
		"PATH=/usr/bin",
	)
	if c.Memory.AutoLoadLines != 77 || c.Memory.Dir != "/var/mem" || c.NATS.URL != "tls://secure:4222" ||
		c.LLM.BaseURL != "https://api.example/v1" || c.LLM.Model != "big" || c.LLM.APIKey.Reveal() != "sk-env" ||
		!reflect.DeepEqual(c.NATS.Consumer.Backoff, []time.Duration{45 * time.Second, 2 * time.Minute, 3 * time.Minute}) {
		t.Fatalf("environment not applied over the file: %+v", c)
	}
	if c.Memory.Backend != "jetstream" {
		t.Errorf("file value not set by the environment was lost: %q", c.Memory.Backend)
	}
}

// envValue returns a value for key's type that differs from def, as an environment
// string, and the typed value it must decode to.
func envValue(t *rapid.T, key string, def any) (string, any) {
	switch d := def.(type) {
	case string:
		v := "/" + rapid.StringMatching(`[a-z0-9]{1,12}`).Draw(t, key)
		return v, v
	case Secret:
		v := rapid.StringMatching(`[A-Za-z0-9-]{1,20}`).Draw(t, key)
		return v, Secret(v)
	case bool:
		return strconv.FormatBool(!d), !d
	case int:
		v := d + rapid.IntRange(1, 1000).Draw(t, key)
		return strconv.Itoa(v), v
	case float64:
		v := float64(rapid.IntRange(1, 999).Draw(t, key)) / 1000
		return strconv.FormatFloat(v, 'g', -1, 64), v
	case time.Duration:
		v := d + time.Duration(rapid.IntRange(1, 10000).Draw(t, key))*time.Millisecond
		return v.String(), v
	case []time.Duration:
		v := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) time.Duration {
			return time.Duration(rapid.IntRange(1, 600).Draw(t, "s")) * time.Second
		}), 1, 5).Draw(t, key)
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = x.String()
		}
		return strings.Join(parts, ","), v
	case TenantQuotas:
		n := rapid.IntRange(1, 1000).Draw(t, key)
		return fmt.Sprintf(`{"acme":{"memories":%d}}`, n), TenantQuotas{"acme": {Memories: &n}}
	case []string:
		v := rapid.SliceOfN(rapid.StringMatching(`[a-z][a-z0-9-]{0,10}(\.[a-z]{2,5}){0,2}`), 1, 4).Draw(t, key)
		return strings.Join(v, ","), v
	}
	t.Fatalf("%s: no generator for %T", key, def)
	return "", nil
}

// Every key can be set through its AGENTMEM_ variable, and only that key changes.
func TestEveryKeyReachableByEnvironment(t *testing.T) {
	if len(envKeys) != len(leaves) {
		t.Fatalf("%d keys but %d distinct environment names: the mapping is ambiguous", len(leaves), len(envKeys))
	}
	base, err := load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	baseFlat := base.flatten()
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.SampledFrom(Keys()), 1, 6, rapid.ID[string]).Draw(t, "keys")
		var env []string
		want := map[string]any{}
		for _, k := range keys {
			s, v := envValue(t, k, baseFlat[k])
			env = append(env, EnvName(k)+"="+s)
			want[k] = v
		}
		c, err := load("", env)
		if err != nil {
			t.Fatalf("load(%v): %v", env, err)
		}
		for k, v := range c.flatten() {
			w, set := want[k]
			if !set {
				w = baseFlat[k]
				if strings.HasPrefix(k, "memory.dir") || k == "vector.path" || k == "nats.embedded.store_dir" {
					if _, dataDirSet := want["data_dir"]; dataDirSet {
						continue // derived from the data_dir just set
					}
				}
			}
			if !reflect.DeepEqual(v, w) {
				t.Fatalf("env %v: %s = %#v, want %#v", env, k, v, w)
			}
		}
	})
}

func TestUnknownEnvironmentVariableIsAnError(t *testing.T) {
	_, err := Load("", []string{"AGENTMEM_MEMORY_DIRR=/x", "AGENTMEM_LLM_MODEL=m", "AGENTMEM_NAT_URL=nats://x:1"})
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "AGENTMEM_MEMORY_DIRR") || !strings.Contains(err.Error(), "AGENTMEM_NAT_URL") {
		t.Fatalf("error = %v, want ErrUnknownKey naming both typos", err)
	}
}

func TestUnknownFileKeyIsAnError(t *testing.T) {
	_, err := Load(writeFile(t, "c.yaml", "memory:\n  auto_load_line: 5\nnats:\n  tls:\n    ca: x\n"), nil)
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"memory.auto_load_line"`) || !strings.Contains(err.Error(), `"nats.tls.ca"`) {
		t.Fatalf("error = %v, want ErrUnknownKey naming both keys", err)
	}
}

func TestFileErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); !errors.Is(err, ErrFile) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing explicit file: %v", err)
	}
	if _, err := Load(writeFile(t, "bad.yaml", "memory: [unclosed"), nil); !errors.Is(err, ErrFile) {
		t.Errorf("malformed YAML: %v", err)
	}
}

func TestBadValuesNameTheirKey(t *testing.T) {
	cases := []struct {
		env  []string
		file string
		keys []string
	}{
		{env: []string{"AGENTMEM_MEMORY_AUTO_LOAD_LINES=abc"}, keys: []string{"memory.auto_load_lines: "}},
		{env: []string{"AGENTMEM_NATS_CONSUMER_ACK_WAIT=30"}, keys: []string{"nats.consumer.ack_wait: "}},
		{file: "nats:\n  consumer:\n    ack_wait: 30\n", keys: []string{"nats.consumer.ack_wait: "}},
		{env: []string{"AGENTMEM_VECTOR_MERGE_THRESHOLD=high"}, keys: []string{"vector.merge_threshold: "}},
		{file: "memory: 5\n", keys: []string{"memory: "}},
		{env: []string{
			"AGENTMEM_MEMORY_AUTO_LOAD_LINES=0",
			"AGENTMEM_MEMORY_BACKEND=s3",
			"AGENTMEM_MEMORY_TARGET_LINES=600",
			"AGENTMEM_MEMORY_RETRIEVE_LIMIT=0",
			"AGENTMEM_NATS_URL=http://nats:4222",
			"AGENTMEM_NATS_PASSWORD=p",
			"AGENTMEM_NATS_STREAM_REPLICAS=7",
			"AGENTMEM_NATS_CONSUMER_MAX_DELIVER=2",
			"AGENTMEM_NATS_TLS_CERT_FILE=/c.pem",
			"AGENTMEM_LLM_BASE_URL=https://llm/v1",
			"AGENTMEM_EMBED_PROVIDER=cohere",
			"AGENTMEM_VECTOR_BACKEND=qdrant",
			"AGENTMEM_VECTOR_SEPARATE_THRESHOLD=0.9",
			"AGENTMEM_SEARCH_MIN_SCORE=-0.1",
			"AGENTMEM_INGEST_BATCH_SIZE=64",
			"AGENTMEM_INGEST_CONCURRENCY=32",
			"AGENTMEM_INGEST_BATCH_LINGER=0s",
			"AGENTMEM_INGEST_CONTEXT_MESSAGES=-2",
			"AGENTMEM_HTTP_LISTEN=9090",
			"AGENTMEM_HTTP_UI_HOSTS=mem.example.com,http://mem.example.com:9090",
			"AGENTMEM_LOG_LEVEL=loud",
			"AGENTMEM_LOG_FORMAT=xml",
			"AGENTMEM_RUNTIME_GC_MIN_HEAP_MB=-1",
		}, keys: []string{
			"memory.auto_load_lines: must be >= 1", "memory.backend: ", "memory.target_lines: ", "memory.retrieve_limit: ",
			"nats.url: ", "nats.user: ", "nats.stream.replicas: ", "nats.consumer.backoff: ", "nats.tls.cert_file: ",
			"llm.model: ", "embed.provider: ", "vector.qdrant.addr: ", "vector.separate_threshold: ", "search.min_score: must be a number >= 0",
			"ingest.concurrency: must be >= 64", "ingest.batch_linger: ", "ingest.context_messages: must be >= -1",
			"http.listen: ", `http.ui_hosts: must be host names or IP addresses without port, scheme or wildcard, got "http://mem.example.com:9090"`,
			"log.level: ", "log.format: ", "runtime.gc_min_heap_mb: must be >= 0",
		}},
	}
	for _, tc := range cases {
		path := ""
		if tc.file != "" {
			path = writeFile(t, "c.yaml", tc.file)
		}
		_, err := Load(path, tc.env)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("env %v file %q: error %v, want ErrInvalid", tc.env, tc.file, err)
			continue
		}
		for _, k := range tc.keys {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("env %v file %q: error %q does not name %q", tc.env, tc.file, err, k)
			}
		}
	}
}

func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "llm.key")
	if err := os.WriteFile(keyFile, []byte("  sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustLoad(t, "", "AGENTMEM_LLM_API_KEY_FILE="+keyFile, "AGENTMEM_EMBED_API_KEY=sk-inline",
		"AGENTMEM_NATS_USER=agent", "AGENTMEM_NATS_PASSWORD_FILE="+keyFile)
	for name, get := range map[string]func() (string, error){
		"llm":      c.LLM.APIKeyValue,
		"embed":    c.Embed.APIKeyValue,
		"password": c.NATS.PasswordValue,
		"qdrant":   c.Vector.Qdrant.APIKeyValue,
		"token":    c.NATS.TokenValue,
	} {
		want := map[string]string{"llm": "sk-from-file", "embed": "sk-inline", "password": "sk-from-file"}[name]
		if got, err := get(); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}

	if _, err := (LLM{APIKeyFile: filepath.Join(dir, "nope")}).APIKeyValue(); !errors.Is(err, ErrSecret) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "llm.api_key_file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := (NATS{TokenFile: empty}).TokenValue(); !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), "nats.token_file") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := (Qdrant{APIKey: "a", APIKeyFile: keyFile}).APIKeyValue(); !errors.Is(err, ErrSecret) {
		t.Errorf("both set: %v", err)
	}
	if _, err := Load("", []string{"AGENTMEM_LLM_API_KEY=a", "AGENTMEM_LLM_API_KEY_FILE=" + keyFile}); err == nil || !strings.Contains(err.Error(), "llm.api_key: ") {
		t.Errorf("Validate accepted api_key with api_key_file: %v", err)
	}
}

func TestPrintingNeverShowsSecrets(t *testing.T) {
	secrets := []string{"nats-pass-1", "llm-key-2", "embed-key-3", "qdrant-key-4"}
	c := Default()
	c.NATS.User = "agent"
	c.NATS.Password = Secret(secrets[0])
	c.LLM.APIKey = Secret(secrets[1])
	c.Embed.APIKey = Secret(secrets[2])
	c.Vector.Qdrant.APIKey = Secret(secrets[3])

	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	ym, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("config", zap.Any("config", c), zap.Stringer("key", c.LLM.APIKey))
	logged, err := json.Marshal(logs.All()[0].ContextMap())
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c), "%s": fmt.Sprintf("%s", c.LLM.APIKey),
		"json": string(js), "yaml": string(ym), "zap": string(logged),
	}
	for how, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s output shows secret %q", how, s)
			}
		}
		if !strings.Contains(out, redacted) {
			t.Errorf("%s output does not mark the redaction: %s", how, out)
		}
	}
	if c.LLM.APIKey.Reveal() != secrets[1] {
		t.Errorf("Reveal = %q", c.LLM.APIKey.Reveal())
	}
}

func TestHomeExpansion(t *testing.T) {
	t.Setenv("HOME", "/home/x")
	c := mustLoad(t, "", "AGENTMEM_MEMORY_DIR=~/mem", "AGENTMEM_LLM_API_KEY_FILE=~/keys/llm", "AGENTMEM_LLM_MODEL=~literal")
	if c.Memory.Dir != "/home/x/mem" || c.LLM.APIKeyFile != "/home/x/keys/llm" || c.LLM.Model != "~literal" {
		t.Fatalf("expansion: dir %q key file %q model %q", c.Memory.Dir, c.LLM.APIKeyFile, c.LLM.Model)
	}
}

// JetStream makes BackOff[0] the first ack deadline, whatever ack_wait says; a
// configuration where they differ would redeliver earlier than it claims.
func TestBackoffMustStartAtAckWait(t *testing.T) {
	_, err := Load("", []string{"AGENTMEM_NATS_CONSUMER_ACK_WAIT=30s", "AGENTMEM_NATS_CONSUMER_BACKOFF=1s,5s"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nats.consumer.backoff") {
		t.Fatalf("Load = %v; want an error naming nats.consumer.backoff", err)
	}
}

// Variables reserved for tests (CI sets AGENTMEM_TEST_NODE, AGENTMEM_TEST_QDRANT_ADDR)
// are not configuration and must not stop a binary from starting.
func TestTestVariablesAreIgnored(t *testing.T) {
	c, err := Load("", []string{"AGENTMEM_TEST_NODE=1", "AGENTMEM_TEST_QDRANT_ADDR=localhost:6334"})
	if err != nil {
		t.Fatalf("Load with test variables: %v", err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatal("test variables changed the configuration")
	}
}

// Overrides given by key are loaded as variables and win over the environment.
func TestWithOverrides(t *testing.T) {
	env := WithOverrides([]string{"AGENTMEM_MEMORY_AUTO_LOAD_LINES=50"}, map[string]string{"memory.auto_load_lines": "70", "log.level": "warn"})
	c, err := Load("", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory.AutoLoadLines != 70 || c.Log.Level != "warn" {
		t.Fatalf("auto_load_lines %d, log.level %q; want the overrides 70 and warn", c.Memory.AutoLoadLines, c.Log.Level)
	}
}

// Whatever the file and environment say, a sandboxed run stores only under its
// directory, in the embedded backends, and serves no HTTP; the rest of the
// configuration (here the ingest tuning) is the user's.
func TestSandboxKeepsARunsStateInItsDirectory(t *testing.T) {
	elsewhere, dir := t.TempDir(), t.TempDir()
	file := writeFile(t, "agentmem.yaml", "data_dir: "+elsewhere+"\nvector:\n  backend: qdrant\n  path: "+filepath.Join(elsewhere, "v.db")+"\n")
	env := []string{
		"AGENTMEM_MEMORY_DIR=" + filepath.Join(elsewhere, "memory"),
		"AGENTMEM_MEMORY_BACKEND=" + MemoryBackendJetStream,
		"AGENTMEM_NATS_EMBEDDED_STORE_DIR=" + filepath.Join(elsewhere, "nats"),
		"AGENTMEM_HTTP_LISTEN=127.0.0.1:9464",
		"AGENTMEM_INGEST_CONCURRENCY=1024",
	}
	c := mustLoad(t, file, WithOverrides(env, Sandbox(dir))...)
	for key, path := range map[string]string{"data_dir": c.DataDir, "memory.dir": c.Memory.Dir, "vector.path": c.Vector.Path, "nats.embedded.store_dir": c.NATS.Embedded.StoreDir} {
		if rel, err := filepath.Rel(dir, path); err != nil || !filepath.IsLocal(rel) {
			t.Errorf("%s = %s, outside the run's directory %s", key, path, dir)
		}
	}
	if c.Memory.Backend != MemoryBackendFilesystem || c.Vector.Backend != VectorBackendEmbedded {
		t.Errorf("backends memory %q, vector %q; want the filesystem and the embedded store", c.Memory.Backend, c.Vector.Backend)
	}
	if c.HTTP.Listen != "" || c.NATS.Embedded.Listen != "" {
		t.Errorf("listeners http %q, nats %q; want none", c.HTTP.Listen, c.NATS.Embedded.Listen)
	}
	if c.Ingest.Concurrency != 1024 {
		t.Errorf("ingest.concurrency = %d; want the environment's 1024", c.Ingest.Concurrency)
	}
}

// A binary's --config wins over AGENTMEM_CONFIG, which names the file otherwise.
func TestFile(t *testing.T) {
	env := []string{"HOME=/h", EnvConfigFile + "=/etc/agentmem.yaml"}
	for _, c := range []struct {
		flag    string
		environ []string
		want    string
	}{
		{"", nil, ""},
		{"", env, "/etc/agentmem.yaml"},
		{"mine.yaml", env, "mine.yaml"},
	} {
		if got := File(c.flag, c.environ); got != c.want {
			t.Errorf("File(%q, %v) = %q, want %q", c.flag, c.environ, got, c.want)
		}
	}
}

// The default budget is the smaller of the absolute one and the window's share;
// either alone when the other is off.
func TestContextBudget(t *testing.T) {
	for _, tc := range []struct{ tokens, percent, window, want int }{
		{2000, 0, 8192, 2000},
		{2000, 10, 8192, 819},
		{2000, 50, 8192, 2000},
		{0, 25, 8192, 2048},
		{0, 1, 50, 1},
	} {
		m := Memory{ContextBudgetTokens: tc.tokens, ContextBudgetPercent: tc.percent, ContextWindowTokens: tc.window}
		if got := m.ContextBudget(); got != tc.want {
			t.Errorf("ContextBudget(%d tokens, %d%% of %d) = %d, want %d", tc.tokens, tc.percent, tc.window, got, tc.want)
		}
	}
}

// With the use-lite provider embed.dimensions defaults to the encoder's 512, from
// the environment or a file, and any other length is refused; embed.model_dir is
// optional (the weights are built in).
func TestUSELiteProvider(t *testing.T) {
	c := mustLoad(t, "", "AGENTMEM_EMBED_PROVIDER=use-lite", "AGENTMEM_EMBED_MODEL_DIR=/models/use")
	if c.Embed.Dimensions != USELiteDimensions || c.Embed.ModelDir != "/models/use" {
		t.Errorf("use-lite from the environment: dimensions %d, model_dir %q", c.Embed.Dimensions, c.Embed.ModelDir)
	}
	c = mustLoad(t, writeFile(t, "c.yaml", "embed:\n  provider: use-lite\n  model_dir: /m\n"))
	if c.Embed.Dimensions != USELiteDimensions {
		t.Errorf("use-lite from a file: dimensions %d, want %d", c.Embed.Dimensions, USELiteDimensions)
	}
	if c := mustLoad(t, "", "AGENTMEM_EMBED_PROVIDER=use-lite"); c.Embed.Dimensions != USELiteDimensions || c.Embed.ModelDir != "" {
		t.Errorf("use-lite without model_dir: dimensions %d, model_dir %q; want %d and the built-in weights", c.Embed.Dimensions, c.Embed.ModelDir, USELiteDimensions)
	}
	// docker-compose.yml passes the variable through, empty when the host has none.
	if c := mustLoad(t, "", "AGENTMEM_EMBED_PROVIDER=use-lite", "AGENTMEM_EMBED_DIMENSIONS="); c.Embed.Dimensions != USELiteDimensions {
		t.Errorf("use-lite with an empty AGENTMEM_EMBED_DIMENSIONS: dimensions %d, want %d", c.Embed.Dimensions, USELiteDimensions)
	}
	if c := mustLoad(t, "", "AGENTMEM_EMBED_DIMENSIONS="); c.Embed.Dimensions != 384 {
		t.Errorf("local with an empty AGENTMEM_EMBED_DIMENSIONS: dimensions %d, want the default 384", c.Embed.Dimensions)
	}
	if c := mustLoad(t, ""); c.Embed.Dimensions != 384 {
		t.Errorf("local: dimensions %d, want the default 384", c.Embed.Dimensions)
	}
	for _, tc := range []struct {
		file, key string
		env       []string
	}{
		{env: []string{"AGENTMEM_EMBED_PROVIDER=use-lite", "AGENTMEM_EMBED_MODEL_DIR=/m", "AGENTMEM_EMBED_DIMENSIONS=384"}, key: "embed.dimensions: is 384, want 512"},
		{file: "embed:\n  provider: use-lite\n  model_dir: /m\n  dimensions: 256\n", key: "embed.dimensions: is 256, want 512"},
	} {
		path := ""
		if tc.file != "" {
			path = writeFile(t, "c.yaml", tc.file)
		}
		_, err := Load(path, tc.env)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("env %v file %q: error %v, want ErrInvalid naming %q", tc.env, tc.file, err, tc.key)
		}
	}
}
