package cognitive

import (
	"testing"
	"time"
)

// A named speaker's memory keeps who said it and the whole utterance; an agent's
// user (no name, or a name equal to the role) keeps the decider's statement.
func TestEpisodeTextNamesTheSpeaker(t *testing.T) {
	ep := Episode{Write: true, Thing: "went hiking", Who: "Melanie", Time: time.Unix(0, 0)}
	for _, tc := range []struct {
		obs  Observation
		want string
	}{
		{Observation{Role: "user", Who: "Melanie", Text: " We went hiking on Saturday! "}, "Melanie: We went hiking on Saturday!"},
		{Observation{Role: "user", Who: "user", Text: "We went hiking"}, "went hiking"},
		{Observation{Role: "user", Text: "We went hiking"}, "went hiking"},
	} {
		if got := EpisodeRecord("t", "u", tc.obs, ep).Text; got != tc.want {
			t.Errorf("%+v: text %q, want %q", tc.obs, got, tc.want)
		}
	}
}
