package events

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// A dead letter belongs to the tenant of its original event subject, whatever
// the other tokens hold (a user token that is no id is still the tenant's own
// bad event), and to no tenant when it is not an event subject; a tenant whose
// id starts with another's is never taken for it.
func TestDeadLetterTenantIsTheSubjectsTenant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tenant, user, session := genID().Draw(t, "tenant"), genID().Draw(t, "user"), genID().Draw(t, "session")
		subjects := []func(string, string, string) (string, error){
			ObservationSubject, EndedSubject, SummaryDueSubject,
			func(t, u, _ string) (string, error) { return HitSubject(t, u) },
			func(t, u, _ string) (string, error) { return WriteSubject(t, u) },
		}
		subject, err := subjects[rapid.IntRange(0, len(subjects)-1).Draw(t, "kind")](tenant, user, session)
		if err != nil {
			t.Fatal(err)
		}
		if got := DeadLetterTenant(subject); got != tenant {
			t.Fatalf("DeadLetterTenant(%q) = %q, want %q", subject, got, tenant)
		}
		bad := EventPrefix + "." + tenant + ".obs.u*" + user + "." + session
		if got := DeadLetterTenant(bad); got != tenant {
			t.Fatalf("DeadLetterTenant(%q) = %q, want %q", bad, got, tenant)
		}
		if got := DeadLetterTenant(strings.Replace(subject, EventPrefix+"."+tenant+".", EventPrefix+"."+tenant+"x.", 1)); got == tenant {
			t.Fatalf("a subject of tenant %sx was taken for %s", tenant, tenant)
		}
		if rpc, _ := RPCSubject(tenant, EndpointContext); DeadLetterTenant(rpc) != "" {
			t.Fatalf("DeadLetterTenant(%q) names a tenant", rpc)
		}
	})
}

// Each wrong dead-letter request is told what is wrong with it.
func TestDLQRequestsValidate(t *testing.T) {
	for _, tc := range []struct {
		req  interface{ Validate() error }
		want string // "" for valid
	}{
		{DLQListRequest{}, ""},
		{DLQListRequest{Limit: 5, Reason: ReasonClassMalformed}, ""},
		{DLQListRequest{Limit: MaxLimit + 1}, "limit"},
		{DLQListRequest{Reason: "bogus"}, `reason is "bogus"`},
		{DLQReplayRequest{Seqs: []uint64{3, 1}}, ""},
		{DLQReplayRequest{All: true}, ""},
		{DLQReplayRequest{Reason: ReasonClassMaxDeliveries}, ""},
		{DLQReplayRequest{}, "exactly one of seqs, all and reason"},
		{DLQReplayRequest{All: true, Reason: ReasonClassMalformed}, "exactly one of seqs, all and reason"},
		{DLQReplayRequest{Seqs: []uint64{1}, All: true}, "exactly one of seqs, all and reason"},
		{DLQReplayRequest{Seqs: []uint64{2, 0}}, "seqs[1] is 0"},
		{DLQReplayRequest{Seqs: make([]uint64, MaxLimit+1)}, "at most 1000"},
		{DLQReplayRequest{Seqs: seqsUpTo(MaxLimit)}, ""},
		{DLQReplayRequest{Reason: "bogus"}, `reason is "bogus"`},
	} {
		err := tc.req.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.req, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrInvalidRequest saying %q", tc.req, err, tc.want)
		}
	}
}

// DeadLetterTenant never panics and names a tenant only for an event subject.
func FuzzDeadLetterTenant(f *testing.F) {
	for _, seed := range []string{"mem.acme.obs.u1.s1", "mem.acme", "mem.", "mem..obs", "memrpc.acme.context", "", "mem"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		if got := DeadLetterTenant(subject); got != "" && !strings.HasPrefix(subject, EventPrefix+"."+got) {
			t.Fatalf("DeadLetterTenant(%q) = %q, not the subject's second token", subject, got)
		}
	})
}

// seqsUpTo is 1, 2, ... n: n valid sequences.
func seqsUpTo(n int) []uint64 {
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	return seqs
}
