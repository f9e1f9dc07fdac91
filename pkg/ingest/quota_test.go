package ingest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// A batch whose episodes would take a tenant past its memories quota stores
// none of that tenant's and fails their observations with quota.ErrExceeded;
// another tenant's episodes of the same batch are stored and counted as held,
// and an observation that writes no episode is not refused.
func TestMemoriesQuotaRefusesOnlyTheTenantOverIt(t *testing.T) {
	ctx := context.Background()
	var vectors vectorstore.Store
	// What a tenant holds, read from the rig's store as the app does.
	held := func(ctx context.Context, tenant string) (int, error) {
		users, err := vectors.Users(ctx, tenant)
		if err != nil {
			return 0, err
		}
		total := 0
		for _, u := range users {
			n, err := vectors.Count(ctx, vectorstore.Filter{Tenant: tenant, UserID: u, IncludeExpired: true})
			if err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil
	}
	noBytes := func(context.Context, string) (int, error) { return 0, nil }
	// A refresh of an hour: after the batch, the meter counts what ingest told
	// it was added, not a new reading of the store.
	meter, err := quota.NewMeter(quota.Config{Tenants: map[string]quota.Limits{"acme": {Memories: 1}, "globex": {Memories: 2}}}, held, noBytes, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r, w := newIngest(t, ingest.Config{}, func(d *ingest.Deps) { d.Memories = meter })
	vectors = r.vectors

	say := func(tenant, text string) events.Envelope {
		env := events.New(events.TypeObservation, tenant, "u1", "bot", "s1")
		env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
		return env
	}
	batch := []events.Envelope{
		say("acme", "hi!"),
		say("acme", "Remember: my team meets on Tuesdays"),
		say("globex", "Remember: my invoices live in the finance share"),
		say("acme", "Remember: my fiscal year starts in April"),
	}
	errs := w.HandleBatch(ctx, batch)
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], quota.ErrExceeded) || !errors.Is(errs[3], quota.ErrExceeded) {
		t.Fatalf("results %v; want acme's two episodes refused (2 over a quota of 1), the greeting and globex's accepted", errs)
	}
	for tenant, want := range map[string]string{"acme": "", "globex": "finance share"} {
		recs, _, err := r.vectors.Scroll(ctx, vectorstore.Filter{Tenant: tenant, UserID: "u1"}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if want == "" && len(recs) != 0 || want != "" && (len(recs) != 1 || !strings.Contains(recs[0].Text, want)) {
			t.Fatalf("%s holds %v, want %q", tenant, ids(recs), want)
		}
	}
	// globex holds 1 of 2: one more fits, two do not.
	if err := meter.Check(ctx, "globex", quota.Memories, 1); err != nil {
		t.Fatalf("globex, 1 more: %v", err)
	}
	if err := meter.Check(ctx, "globex", quota.Memories, 2); !errors.Is(err, quota.ErrExceeded) {
		t.Fatalf("globex, 2 more: %v; want ErrExceeded, the stored episode counted", err)
	}
}
