package events

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestSubjectBuildParseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := Subject{Kind: rapid.SampledFrom([]SubjectKind{
			SubjectObservation, SubjectEnded, SubjectHit, SubjectWritten, SubjectConsolidate, SubjectWrite, SubjectRPC, SubjectDLQ,
		}).Draw(t, "kind")}
		switch want.Kind {
		case SubjectObservation, SubjectEnded:
			want.Tenant, want.User, want.Session = genID().Draw(t, "tenant"), genID().Draw(t, "user"), genID().Draw(t, "session")
		case SubjectHit, SubjectWritten, SubjectConsolidate, SubjectWrite:
			want.Tenant, want.User = genID().Draw(t, "tenant"), genID().Draw(t, "user")
		case SubjectRPC:
			want.Tenant, want.Endpoint = genID().Draw(t, "tenant"), rapid.SampledFrom(Endpoints).Draw(t, "endpoint")
		case SubjectDLQ:
			want.Worker = genID().Draw(t, "worker")
		}
		s, err := want.Format()
		if err != nil {
			t.Fatalf("Format(%+v): %v", want, err)
		}
		if strings.ContainsAny(s, "*> ") {
			t.Fatalf("built subject %q holds a wildcard or space", s)
		}
		got, err := ParseSubject(s)
		if err != nil {
			t.Fatalf("ParseSubject(%q): %v", s, err)
		}
		if got != want {
			t.Fatalf("ParseSubject(%q) = %+v, want %+v", s, got, want)
		}
	})
}

func TestSubjectBuildersRejectBadTokens(t *testing.T) {
	type builder struct {
		name   string
		tokens int
		build  func(ids []string) (string, error)
	}
	builders := []builder{
		{"obs", 3, func(ids []string) (string, error) { return ObservationSubject(ids[0], ids[1], ids[2]) }},
		{"ended", 3, func(ids []string) (string, error) { return EndedSubject(ids[0], ids[1], ids[2]) }},
		{"hit", 2, func(ids []string) (string, error) { return HitSubject(ids[0], ids[1]) }},
		{"written", 2, func(ids []string) (string, error) { return WrittenSubject(ids[0], ids[1]) }},
		{"consolidate", 2, func(ids []string) (string, error) { return ConsolidateSubject(ids[0], ids[1]) }},
		{"write", 2, func(ids []string) (string, error) { return WriteSubject(ids[0], ids[1]) }},
		{"rpc", 1, func(ids []string) (string, error) { return RPCSubject(ids[0], EndpointContext) }},
		{"dlq", 1, func(ids []string) (string, error) { return DLQSubject(ids[0]) }},
	}
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SampledFrom(builders).Draw(t, "builder")
		ids := make([]string, b.tokens)
		for i := range ids {
			ids[i] = genID().Draw(t, "good")
		}
		ids[rapid.IntRange(0, b.tokens-1).Draw(t, "pos")] = genBadID().Draw(t, "bad")
		s, err := b.build(ids)
		if err == nil {
			t.Fatalf("%s builder accepted %q: %q", b.name, ids, s)
		}
		if !errors.Is(err, ErrInvalidSubject) || !errors.Is(err, ErrInvalidID) {
			t.Fatalf("%s builder error %q must wrap ErrInvalidSubject and ErrInvalidID", b.name, err)
		}
	})
}

func TestSubjectExamples(t *testing.T) {
	obs, err := ObservationSubject("acme", "u1", "s1")
	if err != nil || obs != "mem.acme.obs.u1.s1" {
		t.Fatalf("ObservationSubject = %q, %v", obs, err)
	}
	rpc, err := RPCSubject("acme", EndpointSessionSummary)
	if err != nil || rpc != "memrpc.acme.session.summary" {
		t.Fatalf("RPCSubject = %q, %v", rpc, err)
	}
	svc, err := RPCServiceSubject(EndpointItemDeleteScope)
	if err != nil || svc != "memrpc.*.item.delete_scope" {
		t.Fatalf("RPCServiceSubject = %q, %v", svc, err)
	}
	if _, err := RPCSubject("acme", "drop_tables"); !errors.Is(err, ErrInvalidSubject) {
		t.Fatalf("RPCSubject with unknown endpoint: %v", err)
	}
	if _, err := RPCServiceSubject("session.*"); !errors.Is(err, ErrInvalidSubject) {
		t.Fatalf("RPCServiceSubject with wildcard endpoint: %v", err)
	}
	if len(Endpoints) != 40 {
		t.Fatalf("Endpoints has %d names, want 40", len(Endpoints))
	}
}

func TestParseSubjectRejects(t *testing.T) {
	for _, s := range []string{
		"",
		"mem",
		"mem.acme.obs.u1",          // missing session
		"mem.acme.obs.u1.s1.extra", // one token too many
		"mem.acme.hit.u1.s1",       // hit has no session
		"mem.acme.obs.*.s1",        // wildcard
		"mem.>",                    // wildcard stream subject
		"mem.acme.obs.u1.>",        // wildcard
		"mem..obs.u1.s1",           // empty tenant
		"mem.acme.unknown.u1",      // unknown kind
		"memrpc.acme",              // no endpoint
		"memrpc.acme.drop",         // unknown endpoint
		"memrpc.acme.session",      // half of a dotted endpoint
		"memrpc.*.context",         // wildcard tenant
		"memdlq",                   // no worker
		"memdlq.ingest.extra",      // too many tokens
		"other.acme.obs.u1.s1",     // unknown prefix
		FilterObservations,
		DLQSubjects,
	} {
		if sub, err := ParseSubject(s); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("ParseSubject(%q) = %+v, %v; want ErrInvalidSubject", s, sub, err)
		}
	}
}

func TestFilterSubjectsMatchBuiltSubjects(t *testing.T) {
	// A filter token "*" matches one token; check each built subject against its filter
	// token by token so the constants cannot drift from the builders.
	matches := func(filter, subject string) bool {
		f, s := strings.Split(filter, "."), strings.Split(subject, ".")
		for i := range f {
			if f[i] == ">" {
				return len(s) > i
			}
			if i >= len(s) || (f[i] != "*" && f[i] != s[i]) {
				return false
			}
		}
		return len(f) == len(s)
	}
	obs, _ := ObservationSubject("t", "u", "s")
	ended, _ := EndedSubject("t", "u", "s")
	hit, _ := HitSubject("t", "u")
	written, _ := WrittenSubject("t", "u")
	cons, _ := ConsolidateSubject("t", "u")
	write, _ := WriteSubject("t", "u")
	dlq, _ := DLQSubject("ingest")
	subjects := map[string]string{
		FilterObservations: obs, FilterEnded: ended, FilterHits: hit, FilterWritten: written, FilterConsolidate: cons, FilterWrites: write,
	}
	for filter, subject := range subjects {
		if !matches(filter, subject) || !matches(StreamSubjects, subject) {
			t.Errorf("%q must match %q and %q", subject, filter, StreamSubjects)
		}
		for other, otherSubject := range subjects {
			if other != filter && matches(filter, otherSubject) {
				t.Errorf("filter %q also matches %q", filter, otherSubject)
			}
		}
	}
	if !matches(DLQSubjects, dlq) || matches(StreamSubjects, dlq) {
		t.Errorf("%q must match %q only", dlq, DLQSubjects)
	}
}
