package app_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
)

// BenchmarkQuietTenantContextBesideNoisy is issue 32.6's isolation figure: the
// p99 of a quiet tenant's context requests through the whole stack, idle and
// while a noisy tenant offers about 1000 observations a second, ten times its
// quotas.events_per_second (100/s: the rest is dead-lettered with class
// quota). Idle and noisy rounds alternate, so that a change in the machine's
// other load shows in both. p99-ratio is noisy over idle (the target: within
// 2×). The sub-benchmark no-quota is the same flood without the quota: all of
// it is ingested, which is what the quota spares the quiet tenant. Run with
//
//	go test -run '^$' -bench QuietTenantContextBesideNoisy -benchtime 1x ./pkg/app/
func BenchmarkQuietTenantContextBesideNoisy(b *testing.B) {
	b.Run("quota", func(b *testing.B) {
		benchmarkQuietBesideNoisy(b, `AGENTMEM_QUOTAS_TENANTS={"noisy":{"events_per_second":100}}`)
	})
	b.Run("no-quota", func(b *testing.B) { benchmarkQuietBesideNoisy(b) })
}

func benchmarkQuietBesideNoisy(b *testing.B, env ...string) {
	const rounds, perRound, flooders = 5, 200, 2
	const every = 2 * time.Millisecond // per flooder: 1000/s together
	stack, _ := apptest.Up(b, env...)
	quiet, noisy := apptest.Client(b, stack, "quiet"), apptest.Client(b, stack, "noisy")
	ctx := context.Background()
	for i := range 60 {
		if _, err := quiet.Say(ctx, "u1", "s1", events.RoleUser, fmt.Sprintf("Remember: report %d goes to finance as a bar chart.", i), nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := quiet.EndSession(ctx, "u1", "s1"); err != nil {
		b.Fatal(err)
	}
	apptest.WaitIdle(b, stack)

	measure := func(lat []time.Duration) []time.Duration {
		for i := range perRound {
			start := time.Now()
			_, err := quiet.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s2", Query: fmt.Sprintf("where does report %d go?", i%60), RecordHits: events.NoHits()})
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	flood := func() (stop func()) {
		done := make(chan struct{})
		var wg sync.WaitGroup
		for f := range flooders {
			wg.Go(func() {
				tick := time.NewTicker(every)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					if _, err := noisy.Say(ctx, fmt.Sprintf("u%d", f), "s1", events.RoleUser, fmt.Sprintf("noisy message %d about spreadsheets", i), nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		return func() { close(done); wg.Wait() }
	}
	var idle, busy []time.Duration
	for b.Loop() {
		for range rounds {
			idle = measure(idle)
			stop := flood()
			busy = measure(busy)
			stop()
			apptest.WaitIdle(b, stack)
		}
	}
	p99 := func(lat []time.Duration) time.Duration {
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	idleP99, busyP99 := p99(idle), p99(busy)
	b.ReportMetric(float64(idleP99.Microseconds()), "idle-p99-µs")
	b.ReportMetric(float64(busyP99.Microseconds()), "noisy-p99-µs")
	b.ReportMetric(float64(busyP99)/float64(idleP99), "p99-ratio")
}
