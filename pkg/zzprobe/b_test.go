package probe

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/session"
)

func BenchmarkDigest(b *testing.B) {
	for _, n := range []int{16} {
		msgs := make([]session.Message, n)
		for i := range msgs {
			msgs[i] = session.Message{EventID: fmt.Sprint(i), Role: events.RoleUser, TS: time.Now(), Text: fmt.Sprintf("Hey Caroline, I went to the LGBTQ support group yesterday and it was so powerful. We talked about report_%d.csv and the deadline 2026-12-%02d. It was great!", i, i%28+1)}
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				lifecycle.SummarizeExtractive("", msgs, 1200)
			}
		})
	}
}
