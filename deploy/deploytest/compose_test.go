package deploytest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agentmem/agentmem/pkg/config"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
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
	out := composeVar.ReplaceAllString(strings.ReplaceAll(s, "$$", "\x00"), "$3")
	if strings.Contains(out, "${") {
		return "", fmt.Errorf("unsupported interpolation in %q", s)
	}
	return strings.ReplaceAll(out, "\x00", "$"), nil
}

// composeConfig loads the configuration a compose service runs with (no config file,
// only its environment).
func composeConfig(t *testing.T, name string, s composeService) config.Config {
	t.Helper()
	var env []string
	for k, v := range s.Environment {
		val, err := interpolate(v)
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
		cfg := composeConfig(t, name, s)
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
	if _, err := interpolate("${A:?required}"); err == nil {
		t.Error("an unsupported form was accepted")
	}
}
