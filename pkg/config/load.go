package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrInvalid marks a value that is malformed or out of range.
	ErrInvalid = errors.New("config: invalid value")
	// ErrUnknownKey marks a file key or AGENTMEM_ variable that matches no key.
	ErrUnknownKey = errors.New("config: unknown key")
	// ErrFile marks a config file that cannot be read or parsed.
	ErrFile = errors.New("config: cannot read config file")
	// ErrSecret marks a secret that cannot be resolved.
	ErrSecret = errors.New("config: cannot resolve secret")
)

// FieldError is one problem with one key; its message starts with the dotted key.
type FieldError struct {
	Key    string
	Reason string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Load builds the configuration from the defaults, the YAML file at path (none when path
// is ""; a path that does not exist is an error) and the AGENTMEM_ variables of environ
// (as from os.Environ), later sources overriding earlier ones, and validates it.
//
// Load is the one place a configuration is validated: every binary and command gets
// its Config from it (through app.LoadConfig, or with WithOverrides for a tool's
// sandbox), and nothing downstream validates a Config again.
func Load(path string, environ []string) (Config, error) {
	c, err := load(path, environ)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// load is Load without the final validation.
func load(path string, environ []string) (Config, error) {
	ko := koanf.New(".")
	if err := ko.Load(flatMap(defaults().flatten()), nil); err != nil {
		return Config{}, fmt.Errorf("config: defaults: %w", err)
	}
	dimensionsSet := false
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("%w %s: %w", ErrFile, path, err)
		}
		if err := checkFileKeys(path, fk); err != nil {
			return Config{}, err
		}
		if err := ko.Merge(fk); err != nil {
			return Config{}, fmt.Errorf("%w %s: %w", ErrFile, path, err)
		}
		dimensionsSet = fk.Exists("embed.dimensions")
	}
	env, err := fromEnv(environ)
	if err != nil {
		return Config{}, err
	}
	// An empty AGENTMEM_EMBED_DIMENSIONS (compose's ${VAR:-} pass-through) is
	// unset: the length then follows the provider.
	if v, inEnv := env["embed.dimensions"]; inEnv && v == "" {
		delete(env, "embed.dimensions")
	}
	_, inEnv := env["embed.dimensions"]
	dimensionsSet = dimensionsSet || inEnv
	if err := ko.Load(flatMap(env), nil); err != nil {
		return Config{}, fmt.Errorf("config: environment: %w", err)
	}

	var c Config
	err = ko.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToWeakSliceHookFunc(","), // backoff from the environment: "1s,5s"
			durationHook,
			tenantQuotasHook,
		),
		// Values from the environment are strings: "200" must become an int.
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		TagName:          "koanf",
	}})
	if err != nil {
		return Config{}, decodeError(err)
	}
	if c.Embed.Provider == EmbedProviderUSELite && !dimensionsSet {
		// The default (384) is the local embedder's; USE-lite has one length.
		c.Embed.Dimensions = USELiteDimensions
	}
	c.resolvePaths()
	return c, nil
}

// flatMap is a koanf.Provider over a map of dotted keys.
type flatMap map[string]any

func (m flatMap) Read() (map[string]any, error) { return maps.Unflatten(m, "."), nil }

func (m flatMap) ReadBytes() ([]byte, error) {
	return nil, errors.New("config: flatMap provides a map, not bytes")
}

func checkFileKeys(path string, fk *koanf.Koanf) error {
	known := make(map[string]bool, len(leaves))
	for _, l := range leaves {
		known[l.key] = true
	}
	var errs []error
	for _, k := range fk.Keys() {
		if !known[k] && !groups[k] && !underMap(k) {
			errs = append(errs, fmt.Errorf("%w %q in %s", ErrUnknownKey, k, path))
		}
	}
	return errors.Join(errs...)
}

// underMap reports whether key is inside a map-valued key (quotas.tenants.acme.memories):
// the map's own type decides which of its keys exist, and decoding refuses the rest.
func underMap(key string) bool {
	for _, l := range leaves {
		if reflect.TypeFor[Config]().FieldByIndex(l.index).Type.Kind() == reflect.Map && strings.HasPrefix(key, l.key+".") {
			return true
		}
	}
	return false
}

// fromEnv returns the keys set by AGENTMEM_ variables.
func fromEnv(environ []string) (map[string]any, error) {
	out := map[string]any{}
	var unknown []string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || name == EnvConfigFile || strings.HasPrefix(name, EnvTestPrefix) {
			continue
		}
		key, known := envKeys[name]
		if !known {
			unknown = append(unknown, name)
			continue
		}
		out[key] = value
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: environment variable(s) %s match no configuration key", ErrUnknownKey, strings.Join(unknown, ", "))
	}
	return out, nil
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook parses "30s"-style durations and refuses bare numbers other than 0:
// "ack_wait: 30" would otherwise silently mean 30 nanoseconds.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		d, err := time.ParseDuration(data.(string))
		if err != nil {
			return nil, fmt.Errorf("want a duration such as \"30s\" or \"168h\", got %q", data)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if reflect.ValueOf(data).IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("want a duration with a unit such as \"30s\", got the bare number %v", data)
	}
	return data, nil
}

var tenantQuotasType = reflect.TypeFor[TenantQuotas]()

// tenantQuotasHook decodes quotas.tenants from the environment, where it is one
// JSON object (a tenant id may hold "_", so it cannot be part of a variable name).
func tenantQuotasHook(from, to reflect.Type, data any) (any, error) {
	if to != tenantQuotasType || from.Kind() != reflect.String {
		return data, nil
	}
	out := TenantQuotas{}
	if strings.TrimSpace(data.(string)) == "" {
		return out, nil
	}
	dec := json.NewDecoder(strings.NewReader(data.(string)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf(`want a JSON object such as {"acme":{"memories":100000}}: %w`, err)
	}
	return out, nil
}

// decodeError turns mapstructure's errors into FieldErrors naming the key.
func decodeError(err error) error {
	var errs []error
	for _, e := range flattenJoined(err) {
		var de *mapstructure.DecodeError
		if errors.As(e, &de) {
			errs = append(errs, &FieldError{Key: de.Name(), Reason: de.Unwrap().Error()})
			continue
		}
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, e))
	}
	return errors.Join(errs...)
}

// flattenJoined lists the leaves of a tree of errors.Join errors.
func flattenJoined(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flattenJoined(e)...)
	}
	return out
}

// resolvePaths expands "~" in every path key and derives the empty ones from data_dir.
// Without a home directory "~" stays, and Validate reports it.
func (c *Config) resolvePaths() {
	v := reflect.ValueOf(c).Elem()
	for _, l := range leaves {
		if isPath(l.key) {
			f := v.FieldByIndex(l.index)
			f.SetString(expandHome(f.String()))
		}
	}
	derive := func(p *string, name string) {
		if *p == "" {
			*p = filepath.Join(c.DataDir, name)
		}
	}
	derive(&c.Memory.Dir, "memory")
	derive(&c.Vector.Path, "vectors.db")
	derive(&c.NATS.Embedded.StoreDir, "nats")
}

func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	return filepath.Join(home, p[1:])
}
