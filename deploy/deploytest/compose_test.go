package deploytest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agentmem/agentmem/pkg/config"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Secrets     []string          `yaml:"secrets"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal(readFile(t, filepath.Join(repoRoot(t), "docker-compose.yml")), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}`)

// interpolate is what docker compose does to a value when no variable of the host is
// set: ${VAR} becomes "", ${VAR:-default} and ${VAR-default} the default, $$ a "$".
func interpolate(s string) (string, error) {
	return interpolateWith(s, nil)
}

// interpolateWith is interpolate with the host's variables host: a set one
// replaces its ${VAR...} (with ":-", only when not empty).
func interpolateWith(s string, host map[string]string) (string, error) {
	out := composeVar.ReplaceAllStringFunc(strings.ReplaceAll(s, "$$", "\x00"), func(m string) string {
		sm := composeVar.FindStringSubmatch(m)
		if v, set := host[sm[1]]; set && (v != "" || sm[2] != ":-") {
			return v
		}
		return sm[3]
	})
	if strings.Contains(out, "${") {
		return "", fmt.Errorf("unsupported interpolation in %q", s)
	}
	return strings.ReplaceAll(out, "\x00", "$"), nil
}

// composeConfig loads the configuration a compose service runs with (no config file,
// only its environment), the host's variables host interpolated.
func composeConfig(t *testing.T, name string, s composeService, host map[string]string) config.Config {
	t.Helper()
	var env []string
	for k, v := range s.Environment {
		val, err := interpolateWith(v, host)
		if err != nil {
			t.Fatalf("service %s: %s: %v", name, k, err)
		}
		env = append(env, k+"="+val)
	}
	cfg, err := config.Load("", env)
	if err != nil {
		t.Fatalf("service %s: its environment does not load: %v", name, err)
	}
	return cfg
}

func TestComposeRunsTheDistributedPipeline(t *testing.T) {
	c := loadCompose(t)
	built := dockerfileBinaries(t)

	nats, ok := c.Services["nats"]
	if !ok {
		t.Fatal("no service nats")
	}
	if v := regexp.MustCompile(`^nats:(\d+)\.(\d+)`).FindStringSubmatch(nats.Image); v == nil {
		t.Errorf("nats image %q has no version tag", nats.Image)
	} else if major, _ := strconv.Atoi(v[1]); major < 2 || (major == 2 && atoi(v[2]) < 11) {
		t.Errorf("nats image %q, want 2.11 or later", nats.Image)
	}
	args := strings.Join(nats.Command, " ")
	if !strings.Contains(" "+args+" ", " -js ") || !strings.Contains(args, "-m 8222") {
		t.Errorf("nats command %q must enable JetStream (-js) and monitoring on 8222 (-m 8222)", args)
	}
	if _, ok := c.Services["qdrant"]; !ok {
		t.Fatal("no service qdrant")
	}
	for _, name := range []string{"nats", "qdrant"} {
		s := c.Services[name]
		if len(s.Volumes) == 0 {
			t.Errorf("service %s keeps its data on no volume", name)
		}
		for _, v := range s.Volumes {
			if vol, _, _ := strings.Cut(v, ":"); !strings.HasPrefix(vol, ".") && !strings.HasPrefix(vol, "/") {
				if _, declared := c.Volumes[vol]; !declared {
					t.Errorf("service %s uses volume %q, which is not declared", name, vol)
				}
			}
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no healthcheck, so depends_on cannot wait for it", name)
		}
	}

	runs := map[string]int{}
	for name, s := range c.Services {
		if name == "nats" || name == "qdrant" {
			continue
		}
		if len(s.Command) == 0 || !built[s.Command[0]] {
			t.Errorf("service %s runs %q, which the Dockerfile does not build", name, s.Command)
			continue
		}
		runs[s.Command[0]]++
		cfg := composeConfig(t, name, s, nil)
		if cfg.Vector.Backend != config.VectorBackendQdrant || cfg.Memory.Backend != config.MemoryBackendJetStream {
			t.Errorf("service %s: vector.backend %q, memory.backend %q; replicas need qdrant and jetstream", name, cfg.Vector.Backend, cfg.Memory.Backend)
		}
		if host, port, err := net.SplitHostPort(cfg.Vector.Qdrant.Addr); err != nil || host != "qdrant" || port != "6334" {
			t.Errorf("service %s: vector.qdrant.addr %q, want the qdrant service's gRPC port qdrant:6334", name, cfg.Vector.Qdrant.Addr)
		}
		if u, err := url.Parse(cfg.NATS.URL); err != nil || u.Hostname() != "nats" || u.Port() != "4222" {
			t.Errorf("service %s: nats.url %q, want the nats service on 4222", name, cfg.NATS.URL)
		}
		wantProbe := "http://127.0.0.1:" + strconv.Itoa(listenPort(t, cfg.HTTP.Listen)) + "/healthz"
		if s.Healthcheck == nil || !strings.Contains(strings.Join(s.Healthcheck.Test, " "), wantProbe) {
			t.Errorf("service %s: healthcheck does not probe %s (http.listen %q)", name, wantProbe, cfg.HTTP.Listen)
		}
		for _, dep := range []string{"nats", "qdrant"} {
			if s.DependsOn[dep].Condition != "service_healthy" {
				t.Errorf("service %s: depends_on %s must have condition service_healthy", name, dep)
			}
		}
	}
	for _, w := range workerBinaries {
		if runs[w] != 1 {
			t.Errorf("worker %s runs in %d compose services, want 1", w, runs[w])
		}
	}
}

// Issue 35: the embedder the header offers works with nothing else set; the
// inspector runs on one service, published on the host's loopback only, with a
// password from a declared secret; the local state stays out of git and of the
// image's build context.
func TestComposeEmbedderInspectorAndLocalState(t *testing.T) {
	c := loadCompose(t)
	var ui []string
	for name, s := range c.Services {
		if name == "nats" || name == "qdrant" {
			continue
		}
		cfg := composeConfig(t, name, s, map[string]string{"AGENTMEM_EMBED_PROVIDER": config.EmbedProviderUSELite})
		if cfg.Embed.Dimensions != config.USELiteDimensions {
			t.Errorf("service %s with AGENTMEM_EMBED_PROVIDER=use-lite: embed.dimensions %d, want %d", name, cfg.Embed.Dimensions, config.USELiteDimensions)
		}
		cfg = composeConfig(t, name, s, nil)
		if !cfg.HTTP.UI {
			continue
		}
		ui = append(ui, name)
		port := strconv.Itoa(listenPort(t, cfg.HTTP.Listen))
		if !slices.Contains(s.Ports, "127.0.0.1:"+port+":"+port) {
			t.Errorf("service %s serves the inspector on %s but publishes %q, want 127.0.0.1:%s:%s", name, port, s.Ports, port, port)
		}
		secret, ok := strings.CutPrefix(cfg.HTTP.UIPasswordFile, "/run/secrets/")
		if _, declared := c.Secrets[secret]; !ok || !declared || !slices.Contains(s.Secrets, secret) {
			t.Errorf("service %s: http.ui_password_file %q is not a secret it mounts (%q)", name, cfg.HTTP.UIPasswordFile, s.Secrets)
		} else if gitignored(t, c.Secrets[secret].File) == "" {
			t.Errorf("the inspector's password file %s is not in .gitignore", c.Secrets[secret].File)
		}
	}
	if len(ui) != 1 {
		t.Errorf("the inspector runs in services %q, want one", ui)
	}
	if gitignored(t, "./data") == "" {
		t.Error(".gitignore does not ignore ./data, the README's --data-dir")
	}
	ignore := string(readFile(t, filepath.Join(repoRoot(t), ".dockerignore")))
	for _, want := range []string{".git", "/data"} {
		if !slices.Contains(strings.Fields(ignore), want) {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
}

// gitignored returns the line of .gitignore that ignores the repository path p
// ("./data"), or "".
func gitignored(t *testing.T, p string) string {
	t.Helper()
	p = "/" + strings.TrimPrefix(p, "./")
	for _, line := range strings.Split(string(readFile(t, filepath.Join(repoRoot(t), ".gitignore"))), "\n") {
		if line = strings.TrimSpace(line); line != "" && strings.TrimSuffix(line, "/") == p {
			return line
		}
	}
	return ""
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func TestInterpolateLikeCompose(t *testing.T) {
	for in, want := range map[string]string{
		"${A:-x}":       "x",
		"${A-x}":        "x",
		"${A}":          "",
		"${A:-}":        "",
		"a$$b":          "a$b",
		"pre-${B:-1}-y": "pre-1-y",
	} {
		if got, err := interpolate(in); err != nil || got != want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	host := map[string]string{"A": "a", "E": ""}
	for in, want := range map[string]string{
		"${A:-x}": "a",
		"${A}":    "a",
		"${E:-x}": "x",
		"${E-x}":  "",
		"${B:-x}": "x",
	} {
		if got, err := interpolateWith(in, host); err != nil || got != want {
			t.Errorf("interpolateWith(%q, %v) = %q, %v; want %q", in, host, got, err, want)
		}
	}
	if _, err := interpolate("${A:?required}"); err == nil {
		t.Error("an unsupported form was accepted")
	}
}
