package qdrant

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	qc "github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// clock records the waits between retries instead of sleeping; after heal waits
// it lifts the recorder's failure, as a server that came back.
type clock struct {
	mu    sync.Mutex
	waits []time.Duration
	heal  int
	r     *recorder
	fails string // method whose failure is lifted
}

func (c *clock) sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	if len(c.waits) == c.heal {
		c.r.mu.Lock()
		delete(c.r.fail, c.fails)
		c.r.mu.Unlock()
	}
	return nil
}

// A call (here the scroll a Get makes) that fails transiently is repeated after 1 s, 2 s and 4 s (SPEC C9); it
// succeeds as soon as the server answers, and after the last retry the error is
// returned, naming the endpoint. An error that is not transient is not repeated.
func TestTransientFailuresRetryOnTheC9Schedule(t *testing.T) {
	get := qc.Points_Scroll_FullMethodName
	for _, tc := range []struct {
		name  string
		err   error
		heal  int
		waits []time.Duration
		ok    bool
	}{
		{"recovers after two waits", status.Error(codes.Unavailable, "connection refused"), 2, []time.Duration{time.Second, 2 * time.Second}, true},
		{"gives up after three retries", status.Error(codes.Unavailable, "connection refused"), 0, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, false},
		{"overloaded", status.Error(codes.ResourceExhausted, "busy"), 1, []time.Duration{time.Second}, true},
		{"not transient", status.Error(codes.InvalidArgument, "bad request"), 0, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ready()
			c := &clock{heal: tc.heal, r: r, fails: get}
			s, err := newRecorded(t, r, Config{Dimensions: 4, sleep: c.sleep})
			if err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			r.fail = map[string]error{get: tc.err}
			r.mu.Unlock()
			_, err = s.Get(context.Background(), "acme", "u1", vectorstore.DeterministicID("x"))
			if (err == nil) != tc.ok {
				t.Fatalf("Get: %v, want success %v", err, tc.ok)
			}
			if !slices.Equal(c.waits, tc.waits) {
				t.Errorf("waits %v, want %v", c.waits, tc.waits)
			}
			if n := len(requests[*qc.ScrollPoints](r, get)); n != len(tc.waits)+1 {
				t.Errorf("%d attempts, want %d", n, len(tc.waits)+1)
			}
			if err != nil && (status.Code(errors.Unwrap(err)) != status.Code(tc.err) || !containsAddr(err)) {
				t.Errorf("error %v: want the server's status and the endpoint named", err)
			}
		})
	}
}

func containsAddr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "127.0.0.1:6334")
}
