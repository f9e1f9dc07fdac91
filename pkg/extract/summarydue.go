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
// runs the policy reflection when one is due (lifecycle.Evolver). A failed
// reflection fails the event: its redelivery finds the summary written and
// reflects again. Handled under the session's lock, like its session_ended.
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
		evolved, err := w.deps.Evolver.Reflect(ctx, env.Tenant, env.UserID, env.SessionID)
		if err != nil {
			return fmt.Errorf("extract: policy reflection of session %s: %w", key, err)
		}
		log.Debug("policy reflection", zap.String("outcome", evolved))
	}
	return nil
}
