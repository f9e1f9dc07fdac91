package events

import (
	"errors"
	"fmt"
)

// MaxIDLength is the longest ID token accepted in a subject.
const MaxIDLength = 128

// ErrInvalidID is returned (wrapped, naming the field) for an ID that cannot be a
// subject token or a path element.
var ErrInvalidID = errors.New("invalid id")

// ValidateID checks that id can be used as one NATS subject token and as one path
// element: 1..128 characters from [A-Za-z0-9_-]. Anything else (".", "*", ">",
// whitespace, "/", "..", NUL, non-ASCII) is rejected rather than escaped, so an ID
// can never widen a subscription or escape a directory.
func ValidateID(field, id string) error {
	if id == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidID, field)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: %s is %d characters long, at most %d are allowed", ErrInvalidID, field, len(id), MaxIDLength)
	}
	// By rune, not by byte: "ü" is named as 'ü', not as the 'Ã' of its first
	// byte; the position is the byte offset.
	for i, c := range id {
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' {
			continue
		}
		return fmt.Errorf("%w: %s %q has character %q at position %d; only A-Z, a-z, 0-9, '_' and '-' are allowed", ErrInvalidID, field, id, c, i)
	}
	return nil
}
