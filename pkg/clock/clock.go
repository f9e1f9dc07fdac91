// Package clock lets a write be applied at the time it was recorded: the stores
// (docstore, memory) read the current time from the context when one is set
// there, so the write applier (pkg/writes) can apply an event of the stream with
// the envelope's time and get the same daily note, snapshot name and record times
// live, in a replay and in a rebuild.
package clock

import (
	"context"
	"time"
)

type key struct{}

// At returns ctx carrying t as the current time for the stores that read it.
func At(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, key{}, t)
}

// Now is the time ctx carries (At), else fallback().
func Now(ctx context.Context, fallback func() time.Time) time.Time {
	if t, ok := ctx.Value(key{}).(time.Time); ok {
		return t
	}
	return fallback()
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()): the retry
// loops' and pacers' wait, which a shutdown must be able to cut short.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
