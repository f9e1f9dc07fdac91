package policy

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestDefaultsMatchSpecB1(t *testing.T) {
	want := map[string]any{
		"retrieve_limit":                    10,
		"recent_days":                       3,
		"session_summary_message_threshold": 20,
		"session_summary_token_percent":     75,
		"session_summary_keep_count":        4,
		"session_relevant_history_limit":    0,
		"session_relevant_fallback_keep":    8,
		"long_term_compress_char_threshold": 0,
		"evolution_enabled":                 false,
		// Not SPEC B1's: the memory scopes' token shares (issue 31).
		"pack_agent_percent":  20,
		"pack_tenant_percent": 20,
	}
	got := asMap(t, Defaults())
	if !reflect.DeepEqual(got, asMap(t, want)) {
		t.Fatalf("defaults = %v, want %v", got, want)
	}
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestKoanfTagsEqualJSONNames(t *testing.T) {
	typ := reflect.TypeFor[Policy]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if j, k := f.Tag.Get("json"), f.Tag.Get("koanf"); j == "" || j != k {
			t.Errorf("%s: json tag %q, koanf tag %q", f.Name, j, k)
		}
	}
}

func TestOverlayChangesOnlyNamedFields(t *testing.T) {
	base := Defaults()
	got, err := base.Overlay([]byte(`{"retrieve_limit": 3, "evolution_enabled": true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := base
	want.RetrieveLimit = 3
	want.EvolutionEnabled = true
	if got != want {
		t.Fatalf("overlay = %+v, want %+v", got, want)
	}
}

func TestDeletingOverridesReturnsToConfig(t *testing.T) {
	base := Defaults()
	base.RecentDays = 9
	for _, in := range [][]byte{nil, {}, []byte("  \n"), []byte("{}")} {
		got, err := base.Overlay(in)
		if err != nil {
			t.Fatalf("Overlay(%q): %v", in, err)
		}
		if got != base {
			t.Fatalf("Overlay(%q) = %+v, want the base %+v", in, got, base)
		}
	}
}

func TestOverlayRejectsBadDocuments(t *testing.T) {
	cases := []struct {
		doc     string
		wantErr error
		naming  string
	}{
		{`{"retrieve_limt": 3}`, ErrInvalidOverrides, "retrieve_limt"},
		{`{"recent_days": "3"}`, ErrInvalidOverrides, "recent_days: want an integer"},
		{`{"recent_days": 2.5}`, ErrInvalidOverrides, "recent_days"},
		{`{"evolution_enabled": 1}`, ErrInvalidOverrides, "evolution_enabled: want a boolean"},
		{`{"recent_days": null}`, ErrInvalidOverrides, "recent_days"},
		{`[1, 2]`, ErrInvalidOverrides, "JSON object"},
		{`null`, ErrInvalidOverrides, "JSON object"},
		{`{"retrieve_limit": 0}`, ErrInvalid, "retrieve_limit"},
		{`{"session_summary_token_percent": 101}`, ErrInvalid, "session_summary_token_percent"},
		{`{"session_summary_keep_count": 20}`, ErrInvalid, "session_summary_keep_count"},
	}
	for _, c := range cases {
		_, err := Defaults().Overlay([]byte(c.doc))
		if !errors.Is(err, c.wantErr) {
			t.Errorf("Overlay(%s) error = %v, want %v", c.doc, err, c.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), c.naming) {
			t.Errorf("Overlay(%s) error %q does not name %q", c.doc, err, c.naming)
		}
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	p := Defaults()
	p.RetrieveLimit = -1
	p.RecentDays = -1
	p.LongTermCompressCharThreshold = -5
	err := p.Validate()
	for _, name := range []string{"retrieve_limit", "recent_days", "long_term_compress_char_threshold"} {
		if !strings.Contains(err.Error(), name+": ") {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v is not a *FieldError wrapping ErrInvalid", err)
	}
}

// genPolicy draws a valid policy.
func genPolicy(t *rapid.T, label string) Policy {
	threshold := rapid.IntRange(1, 100000).Draw(t, label+".threshold")
	return Policy{
		RetrieveLimit:                  rapid.IntRange(1, 1000).Draw(t, label+".retrieve_limit"),
		RecentDays:                     rapid.IntRange(0, 366).Draw(t, label+".recent_days"),
		SessionSummaryMessageThreshold: threshold,
		SessionSummaryTokenPercent:     rapid.IntRange(1, 100).Draw(t, label+".percent"),
		SessionSummaryKeepCount:        rapid.IntRange(0, min(threshold-1, 10000)).Draw(t, label+".keep"),
		SessionRelevantHistoryLimit:    rapid.IntRange(0, 10000).Draw(t, label+".history"),
		SessionRelevantFallbackKeep:    rapid.IntRange(0, 10000).Draw(t, label+".fallback"),
		LongTermCompressCharThreshold:  rapid.IntRange(0, 100_000_000).Draw(t, label+".compress"),
		EvolutionEnabled:               rapid.Bool().Draw(t, label+".evolution"),
	}
}

// Overlaying any subset of a policy's own JSON onto a base sets exactly those fields, and
// is accepted exactly when the merged policy is valid.
func TestOverlayOfMarshalledSubsetRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := genPolicy(t, "base")
		p := genPolicy(t, "p")
		full := asMap(t, p)
		var names []string
		for _, f := range fields {
			names = append(names, f.name)
		}
		subset := rapid.SliceOfDistinct(rapid.SampledFrom(names), rapid.ID[string]).Draw(t, "subset")

		doc := map[string]any{}
		want := base
		wv, pv := reflect.ValueOf(&want).Elem(), reflect.ValueOf(p)
		for _, name := range subset {
			doc[name] = full[name]
			wv.Field(fieldByName[name].index).Set(pv.Field(fieldByName[name].index))
		}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := base.Overlay(b)
		if wantErr := want.Validate(); wantErr != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Overlay(%s) error = %v, want ErrInvalid (%v)", b, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("Overlay(%s): %v", b, err)
		}
		if got != want {
			t.Fatalf("Overlay(%s) = %+v, want %+v", b, got, want)
		}
	})
}

// The full JSON of a valid policy overlaid on any base gives that policy back.
func TestOverlayOfFullJSONIsIdentity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base, p := genPolicy(t, "base"), genPolicy(t, "p")
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := base.Overlay(b)
		if err != nil || got != p {
			t.Fatalf("Overlay(%s) = %+v, %v; want %+v", b, got, err, p)
		}
	})
}

// fataler is what testing.T and rapid.T have in common.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// asMap round-trips v through JSON so maps of Go values compare with decoded ones.
func asMap(t fataler, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The memory scopes' shares leave the user's memory at least the rest of a
// context pack's budget.
func TestPackSharesAtMostTheWholeBudget(t *testing.T) {
	p := Defaults()
	p.PackAgentPercent, p.PackTenantPercent = 60, 40
	if err := p.Validate(); err != nil {
		t.Fatalf("60 + 40: %v", err)
	}
	p.PackTenantPercent = 41
	if err := p.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pack_tenant_percent") {
		t.Fatalf("60 + 41: %v", err)
	}
}
