package session

import (
	"testing"

	"pgregory.net/rapid"
)

// A session crosses its message threshold first just past it, then each time
// its unsummarised messages (KeepCount after a summary) pass it again: never
// twice for one message.
func TestMessageCrossingProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr := SummaryTrigger{MessageThreshold: rapid.IntRange(1, 60).Draw(t, "threshold")}
		tr.KeepCount = rapid.IntRange(0, tr.MessageThreshold-1).Draw(t, "keep")
		last, unsummarised := 0, 0
		for n := 1; n <= 300; n++ {
			unsummarised++
			c := tr.MessageCrossing(n)
			switch {
			case c < last || c > last+1:
				t.Fatalf("crossing %d after %d at message %d", c, last, n)
			case c == last+1:
				if unsummarised != tr.MessageThreshold+1 {
					t.Fatalf("crossing at %d unsummarised messages, want %d", unsummarised, tr.MessageThreshold+1)
				}
				unsummarised = tr.KeepCount
			}
			last = c
		}
	})
}

func TestTokenCrossing(t *testing.T) {
	tr := SummaryTrigger{MessageThreshold: 20, TokenPercent: 75, ContextWindowTokens: 1000}
	for _, c := range []struct{ tokens, want int }{{0, 0}, {749, 0}, {750, 1}, {1499, 1}, {1500, 2}} {
		if got := tr.TokenCrossing(c.tokens); got != c.want {
			t.Errorf("tokenCrossing(%d) = %d, want %d", c.tokens, got, c.want)
		}
	}
	if (SummaryTrigger{}).TokenCrossing(1<<20) != 0 {
		t.Error("the zero trigger crossed")
	}
}
