package qdrant

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The retry schedule of a call that failed transiently (SPEC C9): waits of 1 s,
// 2 s and 4 s before the second, third and fourth attempts.
const (
	DefaultRetries   = 3
	DefaultRetryBase = time.Second
)

// transient reports a gRPC failure worth another attempt: the server was not
// reachable or shed load, or the attempt was aborted. Every call the adapter
// makes is idempotent (upserts and deletes by id, reads), so repeating one is safe.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// retryInterceptor repeats a unary call that failed transiently, up to retries
// times, waiting base, 2·base, 4·base, ... before each; sleep is how it waits
// (tests inject a clock). The call's context bounds the whole, waits included.
func retryInterceptor(retries int, base time.Duration, sleep func(context.Context, time.Duration) error) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoke(ctx, method, req, reply, cc, opts...)
		for attempt := 0; attempt < retries && transient(err); attempt++ {
			if serr := sleep(ctx, base<<attempt); serr != nil {
				return err
			}
			err = invoke(ctx, method, req, reply, cc, opts...)
		}
		return err
	}
}
