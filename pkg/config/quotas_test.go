package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/quota"
)

// Issue 32.6: every quota is off by default; a tenant's override replaces the
// keys it names and keeps the defaults of the rest, from a file or from the
// environment's JSON.
func TestQuotasDefaultsAndTenantOverrides(t *testing.T) {
	if got := Default().Quotas.Quota(); !reflect.DeepEqual(got, quota.Config{}) {
		t.Fatalf("default quotas = %+v, want none", got)
	}
	file := writeFile(t, "q.yaml", `
quotas:
  events_per_second: 50
  memories: 1000
  tenants:
    acme:
      memories: 5
    beta_1:
      events_per_second: 0
      markdown_bytes: 100
`)
	want := quota.Config{
		Default: quota.Limits{EventsPerSecond: 50, Memories: 1000},
		Tenants: map[string]quota.Limits{
			"acme":   {EventsPerSecond: 50, Memories: 5},
			"beta_1": {Memories: 1000, MarkdownBytes: 100},
		},
	}
	if got := mustLoad(t, file).Quotas.Quota(); !reflect.DeepEqual(got, want) {
		t.Errorf("from the file: %+v, want %+v", got, want)
	}
	env := mustLoad(t, file, `AGENTMEM_QUOTAS_TENANTS={"gamma":{"events_burst":7}}`).Quotas.Quota()
	wantEnv := quota.Config{Default: want.Default, Tenants: map[string]quota.Limits{"gamma": {EventsPerSecond: 50, EventsBurst: 7, Memories: 1000}}}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("the environment over the file: %+v, want %+v", env, wantEnv)
	}
}

func TestBadQuotasNameTheirKey(t *testing.T) {
	cases := []struct {
		file, env string
		want      []string
	}{
		{file: "quotas:\n  memories: -1\n  events_per_second: -0.5\n", want: []string{"quotas.memories: must be >= 0", "quotas.events_per_second: must be a number >= 0"}},
		{file: "quotas:\n  tenants:\n    ok:\n      markdown_bytes: -3\n    'a b':\n      memories: 1\n", want: []string{"quotas.tenants.ok.markdown_bytes: must be >= 0", `quotas.tenants: names "a b", which is not a tenant id`}},
		{file: "quotas:\n  tenants:\n    acme:\n      memoriez: 3\n", want: []string{"quotas.tenants[acme]: has invalid keys: memoriez"}},
		{env: `AGENTMEM_QUOTAS_TENANTS={"acme":{"memoriez":3}}`, want: []string{`quotas.tenants: want a JSON object such as`, `unknown field "memoriez"`}},
	}
	for _, c := range cases {
		path := ""
		if c.file != "" {
			path = writeFile(t, "bad.yaml", c.file)
		}
		var env []string
		if c.env != "" {
			env = []string{c.env}
		}
		_, err := Load(path, env)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%q %q: error %v, want ErrInvalid", c.file, c.env, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %q: error %q does not say %q", c.file, c.env, err, w)
			}
		}
	}
}

// Retention (issue 32.6): the dead-letter stream's age limit is a key of its own,
// and an age limit shorter than the duplicate window is refused before JetStream
// would refuse the stream.
func TestStreamAgeLimits(t *testing.T) {
	if got := mustLoad(t, "", "AGENTMEM_NATS_STREAM_DLQ_MAX_AGE=168h").NATS.Stream.DLQMaxAge; got != 168*time.Hour {
		t.Errorf("nats.stream.dlq_max_age = %s, want 168h", got)
	}
	_, err := Load("", []string{"AGENTMEM_NATS_STREAM_DLQ_MAX_AGE=1m", "AGENTMEM_NATS_STREAM_MAX_AGE=90s"})
	for _, w := range []string{"nats.stream.dlq_max_age: is 1m0s, shorter than nats.stream.duplicate_window (2m0s)",
		"nats.stream.max_age: is 1m30s, shorter than nats.stream.duplicate_window (2m0s)"} {
		if !errors.Is(err, ErrInvalid) || !strings.Contains(fmt.Sprint(err), w) {
			t.Errorf("error %v does not say %q", err, w)
		}
	}
}
