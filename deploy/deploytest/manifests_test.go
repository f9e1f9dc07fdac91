package deploytest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agentmem/agentmem/pkg/config"
)

// The parts of the manifests the tests read. Fields the tests do not check are left out;
// yaml.v3 ignores them.

type meta struct {
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace"`
	Labels    map[string]string `yaml:"labels"`
}

// manifest is one YAML document of deploy/k8s; node is decoded again into the type of
// its kind.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
	file       string
	node       *yaml.Node
}

func (m manifest) String() string { return m.Kind + "/" + m.Metadata.Name + " (" + m.file + ")" }

func decodeAs[T any](t *testing.T, m manifest) T {
	t.Helper()
	var v T
	if err := m.node.Decode(&v); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	return v
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type workload struct { // Deployment and StatefulSet
	Spec struct {
		Replicas            *int          `yaml:"replicas"`
		ServiceName         string        `yaml:"serviceName"`
		PodManagementPolicy string        `yaml:"podManagementPolicy"`
		Selector            labelSelector `yaml:"selector"`
		Template            struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64          `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               securityContext `yaml:"securityContext"`
	Containers                    []container     `yaml:"containers"`
	Volumes                       []volume        `yaml:"volumes"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Env     []envVar `yaml:"env"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext securityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type keyRef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *keyRef `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"` // a number or a container port's name
	} `yaml:"httpGet"`
}

type keyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string      `yaml:"name"`
		Items []keyToPath `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string      `yaml:"secretName"`
		Items      []keyToPath `yaml:"items"`
	} `yaml:"secret"`
}

type service struct {
	Spec struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []servicePort     `yaml:"ports"`
	} `yaml:"spec"`
}

type servicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type dataObject struct { // ConfigMap and Secret
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

type scaledObject struct {
	Spec struct {
		ScaleTargetRef struct {
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicaCount *int `yaml:"minReplicaCount"`
		MaxReplicaCount int  `yaml:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `yaml:"type"`
			Metadata map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

type hpa struct {
	Spec struct {
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas int          `yaml:"minReplicas"`
		MaxReplicas int          `yaml:"maxReplicas"`
		Metrics     []metricSpec `yaml:"metrics"`
	} `yaml:"spec"`
}

type metricSpec struct {
	Type     string `yaml:"type"`
	Resource *struct {
		Name string `yaml:"name"`
	} `yaml:"resource"`
}

type pdb struct {
	Spec struct {
		Selector       labelSelector `yaml:"selector"`
		MinAvailable   any           `yaml:"minAvailable"`
		MaxUnavailable any           `yaml:"maxUnavailable"`
	} `yaml:"spec"`
}

type kustomization struct {
	Namespace string     `yaml:"namespace"`
	Resources []string   `yaml:"resources"`
	Images    []imageRef `yaml:"images"`
}

type imageRef struct {
	Name   string `yaml:"name"`
	NewTag string `yaml:"newTag"`
}

// releaseTag is a version tag, vMAJOR.MINOR.PATCH.
var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// repoRoot is the module root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from the test directory: %v", err)
	}
	return root
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocuments parses every document of a multi-document YAML file.
func yamlDocuments(t *testing.T, name string) []*yaml.Node {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, name)))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		docs = append(docs, &n)
	}
}

const k8sDir = "deploy/k8s"

// k8s is the parsed kustomize base.
type k8s struct {
	kustomization
	manifests []manifest
}

// loadK8s parses kustomization.yaml and every resource it lists; a listed file that does
// not exist fails the test.
func loadK8s(t *testing.T) k8s {
	t.Helper()
	dir := filepath.Join(repoRoot(t), k8sDir)
	var k k8s
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "kustomization.yaml")), &k.kustomization); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	for _, res := range k.Resources {
		if _, err := os.Stat(filepath.Join(dir, res)); err != nil {
			t.Fatalf("kustomization.yaml lists resource %s: %v", res, err)
		}
		for _, n := range yamlDocuments(t, filepath.Join(dir, res)) {
			m := manifest{file: res, node: n}
			if err := n.Decode(&m); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			if m.Kind == "" || m.Metadata.Name == "" || m.APIVersion == "" {
				t.Fatalf("%s: a document without apiVersion, kind or metadata.name", res)
			}
			k.manifests = append(k.manifests, m)
		}
	}
	return k
}

func (k k8s) ofKind(kind string) []manifest {
	var out []manifest
	for _, m := range k.manifests {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

func (k k8s) find(kind, name string) (manifest, bool) {
	for _, m := range k.manifests {
		if m.Kind == kind && m.Metadata.Name == name {
			return m, true
		}
	}
	return manifest{}, false
}

// secret is the one Secret of the base, the template of every credential.
func (k k8s) secret(t *testing.T) (manifest, map[string]string) {
	t.Helper()
	secrets := k.ofKind("Secret")
	if len(secrets) != 1 {
		t.Fatalf("want exactly one Secret (the template), got %d", len(secrets))
	}
	d := decodeAs[dataObject](t, secrets[0])
	values := map[string]string{}
	for key, v := range d.StringData {
		values[key] = v
	}
	for key, v := range d.Data {
		values[key] = v // base64, which is as literal as plain text for the leak check
	}
	return secrets[0], values
}

// agentmemContainer is one container of a worker Deployment.
type agentmemContainer struct {
	deployment manifest
	pod        podSpec
	container
}

func (k k8s) workerContainers(t *testing.T) []agentmemContainer {
	t.Helper()
	var out []agentmemContainer
	for _, m := range k.ofKind("Deployment") {
		w := decodeAs[workload](t, m)
		for _, c := range w.Spec.Template.Spec.Containers {
			out = append(out, agentmemContainer{deployment: m, pod: w.Spec.Template.Spec, container: c})
		}
	}
	if len(out) == 0 {
		t.Fatal("no Deployment in the kustomize base")
	}
	return out
}

// mountedFile says which ConfigMap or Secret key a file path inside the container comes
// from: kind "ConfigMap" or "Secret", the object's name and the key.
func (c agentmemContainer) mountedFile(file string) (kind, name, key string, ok bool) {
	for _, vm := range c.VolumeMounts {
		rel, err := filepath.Rel(vm.MountPath, file)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, v := range c.pod.Volumes {
			if v.Name != vm.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				key, ok = projectedKey(v.ConfigMap.Items, rel)
				return "ConfigMap", v.ConfigMap.Name, key, ok
			case v.Secret != nil:
				key, ok = projectedKey(v.Secret.Items, rel)
				return "Secret", v.Secret.SecretName, key, ok
			}
		}
	}
	return "", "", "", false
}

// projectedKey is the key a ConfigMap or Secret volume shows at rel: every key under
// its own name, or only the listed items under their paths.
func projectedKey(items []keyToPath, rel string) (string, bool) {
	if len(items) == 0 {
		return rel, !strings.Contains(rel, "/")
	}
	for _, it := range items {
		if it.Path == rel {
			return it.Key, true
		}
	}
	return "", false
}

// literalEnv is the container's environment with literal values, as os.Environ would
// show it; valueFrom variables are left out (config.Load would only see their values).
func (c container) literalEnv() []string {
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}

func (c container) env(name string) (envVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return envVar{}, false
}

// portOf resolves a probe or Service port: a number, or the name of a container port.
func (c container) portOf(p string) (int, bool) {
	if n, err := strconv.Atoi(p); err == nil {
		return n, true
	}
	for _, cp := range c.Ports {
		if cp.Name == p {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// listenPort is the port of a host:port listen address.
func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: port is not a number", addr)
	}
	return n
}

// loadContainerConfig loads the configuration a worker container sees: the file
// AGENTMEM_CONFIG names (which must be a mounted ConfigMap key), then its literal
// environment, exactly as the binary's config.Load call does.
func (k k8s) loadContainerConfig(t *testing.T, c agentmemContainer) config.Config {
	t.Helper()
	cfgPath := ""
	if e, ok := c.env(config.EnvConfigFile); ok {
		kind, name, key, mounted := c.mountedFile(e.Value)
		if !mounted || kind != "ConfigMap" {
			t.Fatalf("%s: %s=%s is not a file of a mounted ConfigMap", c.deployment, config.EnvConfigFile, e.Value)
		}
		cm, ok := k.find("ConfigMap", name)
		if !ok {
			t.Fatalf("%s: mounts ConfigMap %q, which is not in the base", c.deployment, name)
		}
		content, ok := decodeAs[dataObject](t, cm).Data[key]
		if !ok {
			t.Fatalf("%s: %s names key %q, which ConfigMap %s does not have", c.deployment, config.EnvConfigFile, key, name)
		}
		cfgPath = filepath.Join(t.TempDir(), key)
		if err := os.WriteFile(cfgPath, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(cfgPath, c.literalEnv())
	if err != nil {
		t.Fatalf("%s: the configuration it runs with does not load: %v", c.deployment, err)
	}
	return cfg
}

var reflectSecret = reflect.TypeFor[config.Secret]()

// configFields returns the dotted keys and values of every field of cfg whose type is
// want (config.Secret) or, when suffix is set, whose key ends with it ("_file"). It walks
// the struct the way pkg/config does, so a key added later is checked too.
func configFields(cfg config.Config, want reflect.Type, suffix string) map[string]string {
	out := map[string]string{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
			fv := v.Field(i)
			switch {
			case f.Anonymous && opts == "squash":
				walk(fv, prefix)
			case fv.Kind() == reflect.Struct:
				walk(fv, prefix+name+".")
			case fv.Kind() == reflect.String && (f.Type == want || (suffix != "" && strings.HasSuffix(name, suffix))):
				out[prefix+name] = fv.String()
			}
		}
	}
	walk(reflect.ValueOf(cfg), "")
	return out
}

// serviceHasPort reports whether host (a Service name, possibly qualified with the
// namespace) names a Service of the base with the given port.
func (k k8s) serviceHasPort(t *testing.T, host string, port int) bool {
	t.Helper()
	name, rest, _ := strings.Cut(host, ".")
	if rest != "" && rest != k.Namespace && !strings.HasPrefix(rest, k.Namespace+".svc") {
		return false
	}
	m, ok := k.find("Service", name)
	if !ok {
		return false
	}
	return slices.ContainsFunc(decodeAs[service](t, m).Spec.Ports, func(p servicePort) bool { return p.Port == port })
}

// envNamePattern finds AGENTMEM_ variable names in any text.
var envNamePattern = regexp.MustCompile(`\bAGENTMEM_[A-Z0-9_]*[A-Z0-9]\b`)

// validEnvNames is every AGENTMEM_ variable a binary accepts.
func validEnvNames() map[string]bool {
	valid := map[string]bool{config.EnvConfigFile: true}
	for _, k := range config.Keys() {
		valid[config.EnvName(k)] = true
	}
	return valid
}

// secretName matches variable and key names that carry a credential.
var secretName = regexp.MustCompile(`(?i)(password|api_key|apikey|token|secret|creds)`)

// deploymentFiles lists every file of the deployment artifacts, relative to the root.
func deploymentFiles(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	files := []string{"Dockerfile", "docker-compose.yml"}
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameLabels(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// binaryOf is the binary a container runs: the base name of its command.
func binaryOf(c container) string {
	if len(c.Command) == 0 {
		return ""
	}
	return path.Base(c.Command[0])
}
