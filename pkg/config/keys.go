package config

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// EnvPrefix starts every configuration environment variable.
const EnvPrefix = "AGENTMEM_"

// EnvConfigFile is the one AGENTMEM_ variable that is not a key: binaries read the
// config file path from it (File), and Load ignores it.
const EnvConfigFile = EnvPrefix + "CONFIG"

// File is the configuration file a binary reads: flag (its --config) when set, else
// the value of AGENTMEM_CONFIG in environ ("" for none).
func File(flag string, environ []string) string {
	if flag != "" {
		return flag
	}
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok && name == EnvConfigFile {
			return value
		}
	}
	return ""
}

// EnvTestPrefix starts variables reserved for the project's tests (e.g.
// AGENTMEM_TEST_QDRANT_ADDR); configuration ignores them, so a test environment does
// not stop the binaries it starts.
const EnvTestPrefix = EnvPrefix + "TEST_"

// leaf is one configuration key: its dotted name and where it lives in Config.
type leaf struct {
	key   string
	index []int
}

// leaves lists every key, derived from the struct tags so that defaults, file keys,
// environment names and path expansion can never drift apart.
var leaves = walk(reflect.TypeFor[Config](), "", nil)

// groups holds the keys of nested blocks ("nats", "nats.tls"): a file may name a block
// with no content ("tls:" alone), which is not a typo.
var groups = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range leaves {
		for i := strings.IndexByte(l.key, '.'); i >= 0; i = nextDot(l.key, i) {
			m[l.key[:i]] = true
		}
	}
	return m
}()

func nextDot(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '.')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// envKeys maps each environment variable name to its key.
var envKeys = func() map[string]string {
	m := make(map[string]string, len(leaves))
	for _, l := range leaves {
		m[EnvName(l.key)] = l.key
	}
	return m
}()

// EnvName is the environment variable that sets key.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// WithOverrides returns environ followed by the AGENTMEM_ assignment of each
// override (dotted key → value, in key order), so that values given on a command
// line or by a tool are loaded and validated like any other source and win over it.
func WithOverrides(environ []string, overrides map[string]string) []string {
	out := slices.Clone(environ)
	for _, key := range slices.Sorted(maps.Keys(overrides)) {
		out = append(out, EnvName(key)+"="+overrides[key])
	}
	return out
}

// Sandbox returns the overrides (dotted key → value, for WithOverrides) that keep
// a private run's state under dir whatever the configuration says: its data,
// memory, vector and NATS store paths, the filesystem memory and embedded vector
// backends, and no HTTP listener. A tool that starts a stack from its user's
// configuration (agentmem bench, agentmem eval) applies them, so that it measures
// that configuration's tuning without ever writing into a real deployment's memory
// directory, Qdrant collection or JetStream; it adds its own listener.
func Sandbox(dir string) map[string]string {
	return map[string]string{
		"data_dir":                dir,
		"memory.dir":              filepath.Join(dir, "memory"),
		"memory.backend":          MemoryBackendFilesystem,
		"vector.backend":          VectorBackendEmbedded,
		"vector.path":             filepath.Join(dir, "vectors.db"),
		"nats.embedded.store_dir": filepath.Join(dir, "nats"),
		"nats.embedded.listen":    "",
		"http.listen":             "",
	}
}

// Keys returns every configuration key, in struct order.
func Keys() []string {
	out := make([]string, len(leaves))
	for i, l := range leaves {
		out[i] = l.key
	}
	return out
}

func walk(t reflect.Type, prefix string, index []int) []leaf {
	var out []leaf
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		idx := append(append([]int(nil), index...), i)
		switch {
		case f.Anonymous && opts == "squash":
			out = append(out, walk(f.Type, prefix, idx)...)
		case f.Type.Kind() == reflect.Struct:
			out = append(out, walk(f.Type, prefix+name+".", idx)...)
		default:
			out = append(out, leaf{key: prefix + name, index: idx})
		}
	}
	return out
}

// flatten returns c as a map from key to value.
func (c Config) flatten() map[string]any {
	v := reflect.ValueOf(c)
	m := make(map[string]any, len(leaves))
	for _, l := range leaves {
		m[l.key] = v.FieldByIndex(l.index).Interface()
	}
	return m
}

// isPath reports whether key holds a filesystem path, in which "~" is expanded.
func isPath(key string) bool {
	last := key[strings.LastIndexByte(key, '.')+1:]
	return last == "dir" || last == "path" || strings.HasSuffix(last, "_dir") || strings.HasSuffix(last, "_file")
}
