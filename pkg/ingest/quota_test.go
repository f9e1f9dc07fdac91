package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
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

// A tenant over its events_per_second quota (a burst of one, refilled once in
// 1000 s) has each observation past the first dead-lettered with class quota,
// its episode never written; another tenant's observations go on.
func TestEventRateRefusesOnlyTheTenantOverIt(t *testing.T) {
	rate := quota.NewRate(quota.Config{Tenants: map[string]quota.Limits{"acme": {EventsPerSecond: 0.001, EventsBurst: 1}}})
	r := startIngestWith(t, ingest.Config{}, func(d *ingest.Deps) { d.Rate = rate })
	ctx := context.Background()
	say := func(tenant, text string) events.Envelope {
		env := events.New(events.TypeObservation, tenant, "u1", "bot", "s1")
		env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
		r.publish(t, env)
		return env
	}
	acme := []events.Envelope{
		say("acme", "Remember: my team meets on Tuesdays"),
		say("acme", "Remember: my fiscal year starts in April"),
		say("acme", "Remember: my invoices go to the finance share"),
	}
	say("globex", "Remember: my office is in Lyon")
	say("globex", "Remember: my manager is Ada")
	r.settled(t)

	dls, err := bus.ListDeadLetters(ctx, r.js, bus.DefaultDLQStream, 10)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, dl := range dls {
		var env events.Envelope
		if err := json.Unmarshal(dl.Data, &env); err != nil {
			t.Fatal(err)
		}
		if dl.Class != bus.ClassQuota || env.Tenant != "acme" {
			t.Errorf("dead letter of %s %s, class %q (%s); want only acme's, class %q", env.Tenant, env.ID, dl.Class, dl.Reason, bus.ClassQuota)
		}
		refused = append(refused, env.ID)
	}
	stored := func(tenant string) []string {
		recs, _, err := r.vectors.Scroll(ctx, vectorstore.Filter{Tenant: tenant, UserID: "u1"}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, rec := range recs {
			texts = append(texts, rec.Text)
		}
		return texts
	}
	// Exactly one of acme's three is accepted: its episode is stored, the
	// other two are the dead letters.
	var accepted []events.Envelope
	for _, env := range acme {
		if !slices.Contains(refused, env.ID) {
			accepted = append(accepted, env)
		}
	}
	if len(refused) != 2 || len(accepted) != 1 {
		t.Fatalf("dead-lettered %v of acme's %d observations, want all but one", refused, len(acme))
	}
	if got := stored("acme"); len(got) != 1 || !strings.Contains(strings.ToLower(got[0]), strings.ToLower(strings.TrimPrefix(accepted[0].Observation.Text, "Remember: "))) {
		t.Fatalf("acme holds %q, want the episode of the accepted %q alone", got, accepted[0].Observation.Text)
	}
	if got := strings.Join(stored("globex"), "\n"); !strings.Contains(got, "Lyon") || !strings.Contains(got, "Ada") {
		t.Fatalf("globex holds %q, want the episodes of its two observations", got)
	}
}
