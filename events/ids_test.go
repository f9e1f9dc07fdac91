package events

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func TestValidateIDAcceptsExactlyTheIDPattern(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.OneOf(genID(), genBadID(), rapid.String(), rapid.StringMatching(`[A-Za-z0-9_.*>/ -]{0,130}`)).Draw(t, "id")
		err := ValidateID("tenant", id)
		if want := idPattern.MatchString(id); want != (err == nil) {
			t.Fatalf("ValidateID(%q) = %v, pattern match = %v", id, err, want)
		}
		if err != nil && (!errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), "tenant")) {
			t.Fatalf("error %q must wrap ErrInvalidID and name the field", err)
		}
	})
}

func TestValidateIDTable(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"u1", true},
		{"excel-bot_2", true},
		{strings.Repeat("a", 128), true},
		{"01JD3QZ7X4K9M2N8P5R6S7T8V9", true},
		{"", false},
		{".", false},
		{"*", false},
		{">", false},
		{" ", false},
		{"a.b", false},
		{"../x", false},
		{"a/b", false},
		{"a\x00b", false},
		{strings.Repeat("a", 129), false},
		{"café", false},
		{"用户", false},
	} {
		err := ValidateID("user_id", tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}

// Issue 30.7: a bad character is named as written, not by the first byte of
// its UTF-8 encoding ("ü", not "Ã").
func TestValidateIDNamesANonASCIICharacter(t *testing.T) {
	for id, want := range map[string]string{"müller": `character 'ü' at position 1`, "用户": `character '用' at position 0`, "a\x00b": `character '\x00' at position 1`} {
		err := ValidateID("user_id", id)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateID(%q) = %v, want it to name %s", id, err, want)
		}
	}
}
