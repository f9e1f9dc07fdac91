package deploytest

import (
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestEveryAgentmemVariableIsAConfigKey: pkg/config refuses an unknown AGENTMEM_
// variable, so a misspelt one in a manifest is a worker that never starts.
func TestEveryAgentmemVariableIsAConfigKey(t *testing.T) {
	root := repoRoot(t)
	valid := validEnvNames()
	seen := map[string]bool{}
	for _, f := range deploymentFiles(t) {
		for _, name := range envNamePattern.FindAllString(string(readFile(t, filepath.Join(root, f))), -1) {
			seen[name] = true
			if !valid[name] {
				t.Errorf("%s names %s, which is no configuration key (see config.Keys)", f, name)
			}
		}
	}
	// The scan must have seen the variables the artifacts are known to use.
	for _, name := range []string{"AGENTMEM_CONFIG", "AGENTMEM_NATS_URL", "AGENTMEM_VECTOR_QDRANT_ADDR", "AGENTMEM_MEMORY_BACKEND"} {
		if !seen[name] {
			t.Errorf("%s appears in no deployment file: the scan is broken or the artifacts lost it", name)
		}
	}
	if valid["AGENTMEM_NOT_A_KEY"] {
		t.Error("the set of valid names accepts anything")
	}
}

// TestNoSecretOutsideTheSecretTemplate: credentials live only in the Secret (as
// placeholders); workloads take them from it by reference, compose from the host.
func TestNoSecretOutsideTheSecretTemplate(t *testing.T) {
	k := loadK8s(t)
	secretManifest, values := k.secret(t)
	if len(values) == 0 {
		t.Fatal("the Secret template has no keys")
	}
	root := repoRoot(t)
	secretFile := k8sDir + "/" + secretManifest.file
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, f := range deploymentFiles(t) {
		if f == secretFile {
			continue
		}
		text := string(readFile(t, filepath.Join(root, f)))
		for _, key := range keys {
			if v := values[key]; v != "" && strings.Contains(text, v) {
				t.Errorf("%s contains the value of Secret key %s", f, key)
			}
		}
	}

	// Kubernetes: a credential variable comes from an existing key of the Secret.
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, m := range k.ofKind(kind) {
			for _, c := range decodeAs[workload](t, m).Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if !secretName.MatchString(e.Name) {
						continue
					}
					ref := (*keyRef)(nil)
					if e.ValueFrom != nil {
						ref = e.ValueFrom.SecretKeyRef
					}
					if ref == nil || ref.Name != secretManifest.Metadata.Name {
						t.Errorf("%s: %s is not taken from Secret %s", m, e.Name, secretManifest.Metadata.Name)
					} else if _, ok := values[ref.Key]; !ok {
						t.Errorf("%s: %s refers to key %q, which Secret %s lacks", m, e.Name, ref.Key, ref.Name)
					}
				}
			}
		}
	}
	// No ConfigMap sets a credential, only references ($VAR) or *_file paths.
	inline := regexp.MustCompile(`(?im)^\s*"?([a-z_]*(?:password|api_key|token|secret))"?\s*[:=]\s*(\S+)`)
	for _, m := range k.ofKind("ConfigMap") {
		for key, text := range decodeAs[dataObject](t, m).Data {
			for _, hit := range inline.FindAllStringSubmatch(text, -1) {
				if v := strings.Trim(hit[2], `"'`); v != "" && !strings.HasPrefix(v, "$") {
					t.Errorf("%s key %s sets %s inline", m, key, hit[1])
				}
			}
		}
	}

	// Compose: a credential variable is passed through from the host, with no default.
	c := loadCompose(t)
	var passed int
	for name, s := range c.Services {
		for env, v := range s.Environment {
			if !secretName.MatchString(env) {
				continue
			}
			if secret, ok := strings.CutPrefix(v, "/run/secrets/"); ok && strings.HasSuffix(env, "_FILE") {
				// A path to a compose secret the service mounts is no credential.
				if !slices.Contains(s.Secrets, secret) {
					t.Errorf("compose service %s: %s = %q names a secret it does not mount", name, env, v)
				}
				continue
			}
			passed++
			if !slices.Contains([]string{"${" + env + "}", "${" + env + ":-}"}, v) {
				t.Errorf("compose service %s: %s = %q, want a pass-through ${%s:-}", name, env, v, env)
			}
		}
	}
	if passed == 0 {
		t.Error("compose passes no API key through: the LLM endpoint cannot be used")
	}
}
