package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
)

// Targets of the restart phase (issue 34): answering within 5 s of the start,
// and the first requests' p99 within twice the steady one (ctx_p99_us).
const (
	TargetRestartReadyS         = 5.0
	TargetRestartCtxP99VsSteady = 2.0
)

// restart is the restart phase: the first stack, once closed, started again on
// its data directory, as a replica restarts. restart_ready_s is from the start
// of app.Up to the first context pack received for the asked user (whose
// partition the store loads on that request); restart_ctx_p99_us is over the
// Config.Requests (1,000 by default) context requests after it, with no
// warm-up and the same queries as the latency phase.
func restart(ctx context.Context, cfg Config, logger *zap.Logger, res *Result) error {
	began := time.Now()
	b, err := newBencher(ctx, cfg, logger, nil)
	if err != nil {
		return err
	}
	defer b.close()
	subject, err := events.RPCSubject(tenantLoad, events.EndpointContext)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	gen := newTexts(4)
	lat := make([]time.Duration, 0, cfg.Requests)
	prog := newProgress(b.cfg.Progress, "context requests after the restart", cfg.Requests)
	for i := range cfg.Requests + 1 {
		req := events.ContextRequest{UserID: askedUser, AgentID: agentID, SessionID: askedSession, Query: gen.query()}
		data, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		_, took, _, err := b.askContext(ctx, subject, req.Query, data)
		if err != nil {
			return err
		}
		if i == 0 {
			res.RestartReadyS = time.Since(began).Seconds()
			continue
		}
		lat = append(lat, took)
		prog.update(len(lat))
	}
	prog.finish(len(lat))
	res.RestartCtxP50us, res.RestartCtxP99us = micros(percentile(lat, 0.50)), micros(percentile(lat, 0.99))
	return nil
}
