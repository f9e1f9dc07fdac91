package eval

import "testing"

func TestPackTokensAtKTakesOutTheLaterItems(t *testing.T) {
	items := []Item{{Tokens: 10}, {Tokens: 20}, {Tokens: 30}}
	for _, tc := range []struct{ pack, k, want int }{
		{100, 3, 100},
		{100, 5, 100},
		{100, 1, 100 - 21 - 31},
		{100, 0, 100 - 11 - 21 - 31},
		{10, 0, 0},
	} {
		if got := PackTokensAtK(tc.pack, items, tc.k); got != tc.want {
			t.Errorf("PackTokensAtK(%d, k=%d) = %d, want %d", tc.pack, tc.k, got, tc.want)
		}
	}
}

func TestRecallAtTokensTakesTheItemsWithinTheBudget(t *testing.T) {
	items := []Item{{DiaIDs: []string{"a"}, Tokens: 100}, {DiaIDs: []string{"b"}, Tokens: 50}, {DiaIDs: []string{"c"}, Tokens: 10}}
	for _, tc := range []struct {
		budget int
		want   float64
	}{{99, 0}, {100, 1.0 / 3}, {159, 2.0 / 3}, {160, 1}, {10000, 1}} {
		if got, ok := RecallAtTokens([]string{"a", "b", "c"}, items, tc.budget); !ok || got != tc.want {
			t.Errorf("RecallAtTokens(budget %d) = %v, %v; want %v", tc.budget, got, ok, tc.want)
		}
	}
}
