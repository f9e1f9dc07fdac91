package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Defaults of the degraded reads (issue 22: degrade, don't fail).
const (
	// DefaultQueryEmbedTimeout bounds the embedding of a read's query: a dead
	// embedder costs a context request at most this long.
	DefaultQueryEmbedTimeout = 1500 * time.Millisecond
	// DefaultEmbedRetryAfter is how long after a failed query embedding reads do
	// not try the embedder again and go straight to BM25.
	DefaultEmbedRetryAfter = 10 * time.Second
)

// DegradedEmbedder prefixes the Degraded note of a read the embedder failed.
const DegradedEmbedder = "embedder unavailable"

// queryVector embeds a read's query within Config.QueryEmbedTimeout. When the
// embedder fails, times out or failed less than Config.EmbedRetryAfter ago, it
// returns no vector and the degraded note instead of an error: the read goes on
// with BM25 alone. Only the end of ctx itself is an error.
func (s *Service) queryVector(ctx context.Context, query string) ([]float32, []string, error) {
	if until := s.embedDownUntil.Load(); until != 0 && s.clock().UnixNano() < until {
		return nil, []string{fmt.Sprintf("%s: %s (failed within the last %s; BM25 only)", DegradedEmbedder, s.lastEmbedErr(), s.cfg.EmbedRetryAfter)}, nil
	}
	ectx, cancel := context.WithTimeout(ctx, s.cfg.QueryEmbedTimeout)
	vec, err := embedOne(ectx, s.query, query)
	cancel()
	if err == nil {
		if s.embedDownUntil.Swap(0) != 0 {
			s.logger.Info("embedder answers again; reads use it")
		}
		return vec, nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("memory: embed query: %w", ctx.Err())
	}
	if errors.Is(ectx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s: %w", s.cfg.QueryEmbedTimeout, err)
	}
	msg := err.Error()
	s.embedErr.Store(&msg)
	if s.embedDownUntil.Swap(s.clock().Add(s.cfg.EmbedRetryAfter).UnixNano()) == 0 {
		s.logger.Warn("embedder unavailable; reads rank by BM25 alone and say so in degraded", zap.String("error", msg),
			zap.Duration("retry_after", s.cfg.EmbedRetryAfter))
	}
	return nil, []string{DegradedEmbedder + ": " + msg}, nil
}

func (s *Service) lastEmbedErr() string {
	if p := s.embedErr.Load(); p != nil {
		return *p
	}
	return "unknown error"
}
