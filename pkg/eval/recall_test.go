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
