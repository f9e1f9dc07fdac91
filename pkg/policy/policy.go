// Package policy holds the tunable memory policy (SPEC B1): retrieval limits, session
// summary and relevant-history settings, long-term compression and evolution. The base
// values come from the config file's memory block; a namespace's policy_overrides.json
// is overlaid on top, so deleting the overrides returns to the configured values.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Sentinel errors; every returned error wraps one of them.
var (
	// ErrInvalid marks a policy value outside its allowed range.
	ErrInvalid = errors.New("policy: invalid value")
	// ErrInvalidOverrides marks a policy_overrides.json that cannot be applied.
	ErrInvalidOverrides = errors.New("policy: invalid overrides")
)

// Policy is the set of tunable parameters of SPEC B1. The JSON names are the keys of
// policy_overrides.json and, through the koanf tags, of the config file's memory block.
type Policy struct {
	// RetrieveLimit is how many MEMORY.md chunks keyword retrieval returns (A10).
	RetrieveLimit int `json:"retrieve_limit" koanf:"retrieve_limit"`
	// RecentDays is how many days of daily notes go with retrieval results (A10).
	RecentDays int `json:"recent_days" koanf:"recent_days"`
	// SessionSummaryMessageThreshold is the message count above which a session is summarised (B2).
	SessionSummaryMessageThreshold int `json:"session_summary_message_threshold" koanf:"session_summary_message_threshold"`
	// SessionSummaryTokenPercent is the share of the context window above which a session is summarised (B2).
	SessionSummaryTokenPercent int `json:"session_summary_token_percent" koanf:"session_summary_token_percent"`
	// SessionSummaryKeepCount is how many recent messages survive a summary verbatim (B2).
	SessionSummaryKeepCount int `json:"session_summary_keep_count" koanf:"session_summary_keep_count"`
	// SessionRelevantHistoryLimit > 0 keeps only that many query-relevant turns (B3); 0 is off.
	SessionRelevantHistoryLimit int `json:"session_relevant_history_limit" koanf:"session_relevant_history_limit"`
	// SessionRelevantFallbackKeep is how many recent messages are kept otherwise (B3).
	SessionRelevantFallbackKeep int `json:"session_relevant_fallback_keep" koanf:"session_relevant_fallback_keep"`
	// LongTermCompressCharThreshold > 0 compresses MEMORY.md above that size (B4); 0 is off.
	LongTermCompressCharThreshold int `json:"long_term_compress_char_threshold" koanf:"long_term_compress_char_threshold"`
	// EvolutionEnabled lets policy reflection write policy_overrides.json (B5).
	EvolutionEnabled bool `json:"evolution_enabled" koanf:"evolution_enabled"`
	// PackAgentPercent is the most of a context pack's token budget the agent
	// scope's entries may take; PackTenantPercent the tenant scope's. They are
	// filled right after the user's memory items, so shared knowledge is in the
	// pack however large the user's memory is, and never crowds out more than
	// this of it; what they leave unused goes to the user's memory. 0 leaves a
	// scope out of the pack.
	PackAgentPercent  int `json:"pack_agent_percent" koanf:"pack_agent_percent"`
	PackTenantPercent int `json:"pack_tenant_percent" koanf:"pack_tenant_percent"`
}

// Defaults returns the SPEC B1 defaults.
func Defaults() Policy {
	return Policy{
		RetrieveLimit:                  10,
		RecentDays:                     3,
		SessionSummaryMessageThreshold: 20,
		SessionSummaryTokenPercent:     75,
		SessionSummaryKeepCount:        4,
		SessionRelevantHistoryLimit:    0,
		SessionRelevantFallbackKeep:    8,
		LongTermCompressCharThreshold:  0,
		EvolutionEnabled:               false,
		PackAgentPercent:               20,
		PackTenantPercent:              20,
	}
}

// FieldError is one invalid field. Field is the JSON/config name, so a caller embedding
// the policy in a larger document can re-key it (the config package prefixes "memory.").
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// intRanges bounds each integer field. The upper bounds are not physical limits: they keep
// a bad evolution proposal (B5, written by an LLM) from producing an absurd policy.
var intRanges = map[string][2]int{
	"retrieve_limit":                    {1, 1000},
	"recent_days":                       {0, 366},
	"session_summary_message_threshold": {1, 100000},
	"session_summary_token_percent":     {1, 100},
	"session_summary_keep_count":        {0, 10000},
	"session_relevant_history_limit":    {0, 10000},
	"session_relevant_fallback_keep":    {0, 10000},
	"long_term_compress_char_threshold": {0, 100_000_000},
	"pack_agent_percent":                {0, 100},
	"pack_tenant_percent":               {0, 100},
}

// Validate reports every field outside its range, each as a *FieldError naming the field,
// joined with errors.Join.
func (p Policy) Validate() error {
	var errs []error
	v := reflect.ValueOf(p)
	for _, f := range fields {
		r, ok := intRanges[f.name]
		if !ok {
			continue
		}
		if n := int(v.Field(f.index).Int()); n < r[0] || n > r[1] {
			errs = append(errs, &FieldError{Field: f.name, Reason: fmt.Sprintf("must be between %d and %d, got %d", r[0], r[1], n)})
		}
	}
	// A summary that keeps every message would never shorten anything.
	if p.SessionSummaryKeepCount >= p.SessionSummaryMessageThreshold {
		errs = append(errs, &FieldError{Field: "session_summary_keep_count", Reason: fmt.Sprintf(
			"must be less than session_summary_message_threshold (%d), got %d", p.SessionSummaryMessageThreshold, p.SessionSummaryKeepCount)})
	}
	// The user's memory keeps at least the rest of the budget.
	if p.PackAgentPercent+p.PackTenantPercent > 100 {
		errs = append(errs, &FieldError{Field: "pack_tenant_percent", Reason: fmt.Sprintf(
			"with pack_agent_percent (%d) must be at most 100, got %d", p.PackAgentPercent, p.PackTenantPercent)})
	}
	return errors.Join(errs...)
}

// Overlay applies a policy_overrides.json document to p. The document is a JSON object
// with any subset of the fields; unknown keys, null and wrongly typed values are errors
// naming the key. Empty input (no overrides file) returns p unchanged. The result is
// validated.
func (p Policy) Overlay(overridesJSON []byte) (Policy, error) {
	if len(bytes.TrimSpace(overridesJSON)) == 0 {
		return p, p.Validate()
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(overridesJSON, &doc); err != nil {
		return Policy{}, fmt.Errorf("%w: not a JSON object: %v", ErrInvalidOverrides, err)
	}
	if doc == nil {
		return Policy{}, fmt.Errorf("%w: not a JSON object: null", ErrInvalidOverrides)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic error order

	out := p
	v := reflect.ValueOf(&out).Elem()
	var errs []error
	for _, k := range keys {
		f, ok := fieldByName[k]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: unknown key %q (known: %s)", ErrInvalidOverrides, k, knownNames))
			continue
		}
		raw := doc[k]
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			errs = append(errs, fmt.Errorf("%w: %s: must not be null", ErrInvalidOverrides, k))
			continue
		}
		if err := json.Unmarshal(raw, v.Field(f.index).Addr().Interface()); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: want %s, got %s", ErrInvalidOverrides, k, jsonKind(v.Field(f.index).Kind()), raw))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Policy{}, err
	}
	if err := out.Validate(); err != nil {
		return Policy{}, err
	}
	return out, nil
}

func jsonKind(k reflect.Kind) string {
	if k == reflect.Bool {
		return "a boolean"
	}
	return "an integer"
}

type field struct {
	name  string
	index int
}

// fields is derived from the struct tags so that Validate, Overlay and the config keys can
// never disagree about the names.
var (
	fields      = policyFields()
	fieldByName = func() map[string]field {
		m := make(map[string]field, len(fields))
		for _, f := range fields {
			m[f.name] = f
		}
		return m
	}()
	knownNames = func() string {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		return strings.Join(names, ", ")
	}()
)

func policyFields() []field {
	t := reflect.TypeFor[Policy]()
	out := make([]field, t.NumField())
	for i := range out {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[i] = field{name: name, index: i}
	}
	return out
}
