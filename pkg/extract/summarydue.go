package extract

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/obs"
)

// summarize handles a summary_due event (SPEC B2): it extends the session's
// running summary with its messages since the last one, all but the latest
// keep count (lifecycle.SessionSummaries, idempotent under redelivery), then
// runs the policy reflection when one is due (lifecycle.Evolver). Handled under
// the session's lock, like its session_ended.
func (w *Worker) summarize(ctx context.Context, env events.Envelope) error {
	log := w.logger.With(obs.Tenant(env.Tenant), obs.User(env.UserID), obs.Session(env.SessionID), obs.EventID(env.ID))
	if w.deps.Summaries == nil {
		log.Warn("summary_due without a session summariser; acknowledged unsummarised")
		return nil
	}
	key := env.Tenant + "." + env.UserID + "." + env.SessionID
	unlock, err := w.locks.lock(ctx, key)
	if err != nil {
		return fmt.Errorf("extract: session %s: %w", key, err)
	}
	defer unlock()
	outcome, err := w.deps.Summaries.Summarize(ctx, env.Tenant, env.UserID, env.SessionID, env.ID)
	if err != nil {
		return fmt.Errorf("extract: summary of session %s: %w", key, err)
	}
	log.Debug("summary_due handled", zap.String("outcome", string(outcome)))
	if w.deps.Evolver != nil {
		// Advisory: a failed reflection is logged (by the Evolver) and skipped,
		// never a reason to summarise again.
		if evolved, err := w.deps.Evolver.Reflect(ctx, env.Tenant, env.UserID, env.SessionID); err == nil {
			log.Debug("policy reflection", zap.String("outcome", evolved))
		}
	}
	return nil
}
