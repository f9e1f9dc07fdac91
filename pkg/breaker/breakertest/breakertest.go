// Package breakertest drives callers of a circuit-broken endpoint in tests.
package breakertest

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentmem/agentmem/pkg/bus"
)

// CallUntilAnswered makes call (attempt 0, 1, …) until it returns nil, waiting
// out each outage between attempts as a stream worker's Router does
// (bus.OutageError's WaitRecovery, then again). An error that is no outage ends
// it, unless again(err) says to call once more. An outage that outlasts ctx ends
// it with ctx's error.
func CallUntilAnswered(ctx context.Context, call func(attempt int) error, again func(error) bool) error {
	for attempt := 0; ; attempt++ {
		err := call(attempt)
		var outage bus.OutageError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &outage):
			if werr := outage.WaitRecovery(ctx); werr != nil {
				return fmt.Errorf("no recovery from %w: %w", err, werr)
			}
		case !again(err):
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
