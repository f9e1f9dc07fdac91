package redact

import (
	"strings"
	"testing"
)

// The length bounds of a value, at the bound and one under it: a password of
// four characters, a labelled key of eight, an unlabelled token of sixteen.
func TestValueLengthBounds(t *testing.T) {
	for _, c := range []struct {
		in, value string
		redacted  bool
	}{
		{"my password is Zq9x", "Zq9x", true},
		{"my password is Zq9", "Zq9", false},
		{"api_key=Ab3dEf9h", "Ab3dEf9h", true},
		{"api_key=Ab3dEf9", "Ab3dEf9", false},
		{"use the token Ab3dEf9hAb3dEf9h now", "Ab3dEf9hAb3dEf9h", true},
	} {
		got, _ := Text(c.in)
		if kept := strings.Contains(got, c.value); kept == c.redacted {
			t.Errorf("Text(%q) = %q; want %q redacted: %v", c.in, got, c.value, c.redacted)
		}
	}
}
