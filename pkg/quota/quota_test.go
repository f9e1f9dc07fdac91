package quota

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// The bucket runs on the stream's time: a backlog stored one second apart and
// drained at once is accepted whole; the same number stored in one instant gets
// the burst alone, and the refusal names the tenant's key.
func TestRateCountsInStreamTime(t *testing.T) {
	r := NewRate(Config{Tenants: map[string]Limits{"noisy": {EventsPerSecond: 1, EventsBurst: 3}}})
	for i := range 100 {
		if err := r.Take("noisy", t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("backlog observation %d, stored a second after the last: %v", i, err)
		}
	}
	burstAt := t0.Add(time.Hour)
	var refused []int
	for i := range 10 {
		if err := r.Take("noisy", burstAt); err != nil {
			refused = append(refused, i)
			var qe *Error
			if !errors.Is(err, ErrExceeded) || !errors.As(err, &qe) || qe.Key != "quotas.tenants.noisy.events_per_second" ||
				!strings.Contains(err.Error(), "tenant noisy") {
				t.Errorf("refusal %v, want an *Error wrapping ErrExceeded naming the tenant and its key", err)
			}
		}
	}
	if len(refused) != 7 || refused[0] != 3 {
		t.Errorf("refused %v of ten stored in one instant, want all after the burst of 3", refused)
	}
	// A redelivered old message counts at the latest time: it refills nothing.
	if err := r.Take("noisy", t0); err == nil {
		t.Errorf("an old message taken after the burst was accepted: time ran back in the bucket")
	}
	if err := r.Take("quiet", burstAt); err != nil {
		t.Errorf("a tenant without a quota was refused: %v", err)
	}
	if NewRate(Config{Default: Limits{Memories: 5}}) != nil {
		t.Errorf("NewRate without an events_per_second quota is not nil")
	}
}

// Property: whatever the order and spacing of the stored times, a limited
// tenant is accepted at most burst + rate × (the span of the times it was
// asked about), and never fewer than burst; a tenant without a quota always.
func TestPropertyRateBoundsAcceptedBySpan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		perSec := float64(rapid.IntRange(1, 50).Draw(t, "rate"))
		burst := rapid.IntRange(0, 20).Draw(t, "burst")
		r := NewRate(Config{Default: Limits{EventsPerSecond: perSec, EventsBurst: burst}, Tenants: map[string]Limits{"free": {}}})
		offsets := rapid.SliceOfN(rapid.IntRange(0, 5000), 1, 300).Draw(t, "ms")
		accepted, latest := 0, 0
		for _, ms := range offsets {
			at := t0.Add(time.Duration(ms) * time.Millisecond)
			if r.Take("acme", at) == nil {
				accepted++
			}
			if err := r.Take("free", at); err != nil {
				t.Fatalf("tenant without a quota refused: %v", err)
			}
			latest = max(latest, ms)
		}
		b := burst
		if b == 0 {
			b = int(perSec)
		}
		span := time.Duration(latest-offsets[0]) * time.Millisecond
		if bound := float64(b) + perSec*span.Seconds(); float64(accepted) > bound+1e-9 {
			t.Fatalf("accepted %d over a span of %s, more than burst %d + %v/s", accepted, span, b, perSec)
		}
		if accepted < min(b, len(offsets)) {
			t.Fatalf("accepted %d of %d, fewer than the burst %d", accepted, len(offsets), b)
		}
	})
}

// The meter reads the stores once per refresh, adds what this process wrote
// meanwhile, reads again after Recount, and reads nothing for a tenant
// without the quota.
func TestMeterCountsAddsAndRefreshes(t *testing.T) {
	stored := map[string]int{"acme": 8}
	reads := 0
	count := func(_ context.Context, tenant string) (int, error) {
		reads++
		return stored[tenant], nil
	}
	m, err := NewMeter(Config{Default: Limits{Memories: 10}, Tenants: map[string]Limits{"free": {}}}, count, count, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	m.now = func() time.Time { return now }
	ctx := context.Background()
	if err := m.Check(ctx, "acme", Memories, 2); err != nil {
		t.Fatalf("8 held + 2 of 10: %v", err)
	}
	m.Added("acme", Memories, 2)
	var qe *Error
	if err := m.Check(ctx, "acme", Memories, 1); !errors.As(err, &qe) || qe.Would != 11 || qe.Key != "quotas.memories" {
		t.Fatalf("10 held + 1: %v, want an *Error: would hold 11, quotas.memories", err)
	}
	if err := m.Check(ctx, "acme", MarkdownBytes, 1<<30); err != nil {
		t.Errorf("a quota the tenant does not have refused: %v", err)
	}
	if err := m.Check(ctx, "free", Memories, 1<<30); err != nil {
		t.Errorf("a tenant without the quota refused: %v", err)
	}
	if reads != 1 {
		t.Errorf("%d reads of the stores within one refresh, want 1", reads)
	}
	stored["acme"] = 3 // another process deleted
	if err := m.Check(ctx, "acme", Memories, 1); err == nil {
		t.Errorf("the count was read again before its refresh")
	}
	m.Recount("acme")
	if err := m.Check(ctx, "acme", Memories, 1); err != nil || reads != 2 {
		t.Errorf("after Recount: %v with %d reads, want the room seen with a second read", err, reads)
	}
	stored["acme"] = 10
	now = now.Add(time.Minute)
	if err := m.Check(ctx, "acme", Memories, 1); err == nil || reads != 3 {
		t.Errorf("after the refresh: %v with %d reads, want refused after a third read", err, reads)
	}
	if m, err := NewMeter(Config{Default: Limits{EventsPerSecond: 5}}, nil, nil, 0); m != nil || err != nil {
		t.Errorf("NewMeter without a held quota = %v, %v; want nil, nil", m, err)
	}
}

// The edges the mutation run found unchecked: a tenant with only a held quota
// (a zero events_per_second) turns no rate on; a meter given no refresh period
// takes the default, and one given a period keeps it; a refusal prints the
// limit as written (5, 2.5), not with a fixed precision.
func TestQuotaEdges(t *testing.T) {
	if r := NewRate(Config{Tenants: map[string]Limits{"acme": {Memories: 5}}}); r != nil {
		t.Errorf("NewRate with a tenant whose events_per_second is 0 is not nil")
	}
	count := func(context.Context, string) (int, error) { return 0, nil }
	for _, c := range []struct{ given, want time.Duration }{{0, DefaultRefresh}, {time.Second, time.Second}} {
		m, err := NewMeter(Config{Default: Limits{Memories: 1}}, count, count, c.given)
		if err != nil || m.refresh != c.want {
			t.Errorf("NewMeter with refresh %s: %v, refresh %s; want %s", c.given, err, m.refresh, c.want)
		}
	}
	for limit, want := range map[float64]string{5: "over quotas.memories (5)", 2.5: "over quotas.memories (2.5)"} {
		e := &Error{Tenant: "acme", Kind: Memories, Key: "quotas.memories", Limit: limit, Would: 6}
		if !strings.Contains(e.Error(), want) {
			t.Errorf("Error() = %q; want it to hold %q", e.Error(), want)
		}
	}
}
