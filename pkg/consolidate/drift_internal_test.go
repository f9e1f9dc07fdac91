package consolidate

import (
	"slices"
	"testing"
)

func TestLostAnchors(t *testing.T) {
	const statement = "Alice paid 1,200 euros for the flight to Lisbon on March 3, 2024."
	for _, c := range []struct {
		rewrite string
		lost    []string
	}{
		{"Alice paid 1,200 euros for the flight to Lisbon on March 3, 2024 (recalled: costs).", nil},
		{"alice paid 1,200 EUR to fly to lisbon on march 3, 2024.", nil},
		{"Alice paid a lot for the flight to Lisbon on March 3, 2024.", []string{"1,200"}},
		{"Alice paid 1,200 euros for a flight on March 3, 2024.", []string{"lisbon"}},
		{"Alice paid 1,200 euros for the flight to Lisbon.", []string{"march", "3", "2024"}},
	} {
		if got := lostAnchors(statement, statement, c.rewrite); !slices.Equal(got, c.lost) {
			t.Errorf("rewrite %q: lost %q, want %q", c.rewrite, got, c.lost)
		}
	}
	// An anchor of the statement the base text does not hold is not required.
	if got := lostAnchors("User met Bob.", "I met him yesterday", "met him"); len(got) != 0 {
		t.Errorf("lost %q of a statement the base does not hold", got)
	}
}
